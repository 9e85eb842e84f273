// A kernel class's __call__ (kspec/kernels/_elementwise.py): `k(*args)` and `k(*args, stream=s)` go straight to
// the kernel's dispatcher (`self._calls.call(args, stream)`, on MISS `self._calls.miss(args, stream, None)`);
// every other call goes to the Python __call__ it stands in for.

static PyObject *S_calls, *S_call, *S_miss;

struct KernelCall {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *slow, *miss;
};

static PyObject* KernelCall_vectorcall(PyObject* op, PyObject* const* argv, size_t nargsf, PyObject* kwnames) {
    KernelCall* self = (KernelCall*)op;
    if (!self->slow) return cleared("kernel call");
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    PyObject* stream = Py_None;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (n < 1 || nkw > 1 || (nkw == 1 && PyUnicode_Compare(PyTuple_GET_ITEM(kwnames, 0), S_stream) != 0))
        return PyObject_Vectorcall(self->slow, argv, nargsf, kwnames);
    if (nkw == 1) {
        if (PyErr_Occurred()) return NULL;  // a keyword name that does not compare
        stream = argv[n];
    }
    PyObject* calls = PyObject_GetAttr(argv[0], S_calls);
    if (!calls) return NULL;
    PyObject* call = PyObject_GetAttr(calls, S_call);
    PyObject* args = call ? PyTuple_New(n - 1) : NULL;
    PyObject* result = NULL;
    if (args) {
        for (Py_ssize_t i = 1; i < n; ++i) PyTuple_SET_ITEM(args, i - 1, Py_NewRef(argv[i]));
        PyObject* pass[2] = {args, stream};
        result = PyObject_Vectorcall(call, pass, 2, NULL);
        if (result == self->miss) {
            Py_DECREF(result);
            result = PyObject_CallMethodObjArgs(calls, S_miss, args, stream, Py_None, NULL);
        }
    }
    Py_DECREF(calls);
    Py_XDECREF(call);
    Py_XDECREF(args);
    return result;
}

static int KernelCall_traverse(PyObject* op, visitproc visit, void* arg) {
    Py_VISIT(((KernelCall*)op)->slow);
    Py_VISIT(((KernelCall*)op)->miss);
    Py_VISIT(Py_TYPE(op));
    return 0;
}

static int KernelCall_clear(PyObject* op) {
    Py_CLEAR(((KernelCall*)op)->slow);
    Py_CLEAR(((KernelCall*)op)->miss);
    return 0;
}

static PyMemberDef KernelCall_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(KernelCall, vectorcall), READONLY, NULL},
    {"__wrapped__", T_OBJECT, offsetof(KernelCall, slow), READONLY, "the Python __call__ it stands in for"},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot KernelCall_slots[] = {
    {Py_tp_call, (void*)PyVectorcall_Call},
    {Py_tp_descr_get, (void*)bind_method},
    {Py_tp_traverse, (void*)KernelCall_traverse},
    {Py_tp_clear, (void*)KernelCall_clear},
    {Py_tp_dealloc, (void*)gc_dealloc},
    {Py_tp_members, (void*)KernelCall_members},
    {Py_tp_doc, (void*)"A kernel class's __call__ in C, falling back to the Python one it wraps."},
    {0, NULL},
};

static PyType_Spec KernelCall_spec = {
    "kspec_fastcall.KernelCall", sizeof(KernelCall), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    KernelCall_slots,
};
static PyTypeObject* KernelCallType;

// kernel_call(slow, miss) -> KernelCall
static PyObject* make_kernel_call(PyObject* module, PyObject* args) {
    PyObject *slow, *miss;
    if (!PyArg_ParseTuple(args, "OO", &slow, &miss)) return NULL;
    KernelCall* self = PyObject_GC_New(KernelCall, KernelCallType);
    if (!self) return NULL;
    self->vectorcall = KernelCall_vectorcall;
    self->slow = Py_NewRef(slow);
    self->miss = Py_NewRef(miss);
    PyObject_GC_Track(self);
    return (PyObject*)self;
}
