// A raw kernel's call for one signature and thread (kspec/runtime/_packer.py's generated method, in C): it
// becomes the kernel class's __call__. Anything the description does not cover goes back to Python: another
// thread, argument types or device (`miss`, the launcher's general launch), and dims, scalars, a host tensor or
// a driver error (`body`, the generated packer, which raises the proper error or retries).

enum RawKind { RAW_SCALAR = 0, RAW_CUPY = 1, RAW_TORCH = 2, RAW_KSPEC = 3, RAW_NONE = 4, RAW_HANDLE = 5 };

static PyObject *S_is_cuda, *S_host_active, *S_shared_mem, *ZERO;

struct RawCall {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject* keep;  // (types, kinds, formats, miss, body, resolve, entered, current_stream, stream_of, stream_attr,
                     //  stream_handle, kind_module, host)
    int n;
    unsigned long thread;
    PyObject** types;
    int* kinds;
    char* formats;
    void* function;  // resolved on the first call
    PyObject *miss, *body, *resolve, *entered, *current_stream, *stream_of, *stream_attr, *stream_handle,
        *kind_module, *host;
};

static int raw_dims(PyObject* o, unsigned* d) {  // an int or a tuple of 1-3 ints; 0: let Python decide
    d[0] = d[1] = d[2] = 1;
    if (PyLong_CheckExact(o)) {
        unsigned long v = PyLong_AsUnsignedLong(o);
        if (PyErr_Occurred() || v > UINT_MAX) {
            PyErr_Clear();
            return 0;
        }
        d[0] = (unsigned)v;
        return 1;
    }
    if (!PyTuple_CheckExact(o) || PyTuple_GET_SIZE(o) < 1 || PyTuple_GET_SIZE(o) > 3) return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); ++i) {
        PyObject* v = PyTuple_GET_ITEM(o, i);
        if (!PyLong_CheckExact(v)) return 0;
        unsigned long x = PyLong_AsUnsignedLong(v);
        if (PyErr_Occurred() || x > UINT_MAX) {
            PyErr_Clear();
            return 0;
        }
        d[i] = (unsigned)x;
    }
    return 1;
}

// One scalar into its 8-byte slot as struct's format letter packs it; 0: let Python decide (its errors).
static int raw_scalar(char* slot, char format, PyObject* v) {
    std::memset(slot, 0, 8);
    if (format == 'd' || format == 'f' || format == 'e') {
        double d = PyFloat_AsDouble(v);
        if (d == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        if (format == 'd') {
            std::memcpy(slot, &d, 8);
        } else if (format == 'f') {
            float f = (float)d;
            if (std::isinf(f) && !std::isinf(d)) return 0;
            std::memcpy(slot, &f, 4);
        } else if (PyFloat_Pack2(d, slot, 1) < 0) {
            PyErr_Clear();
            return 0;
        }
        return 1;
    }
    if (format == '?') {
        int t = PyObject_IsTrue(v);
        if (t < 0) {
            PyErr_Clear();
            return 0;
        }
        slot[0] = (char)t;
        return 1;
    }
    PyObject* i = PyNumber_Index(v);
    if (!i) {
        PyErr_Clear();
        return 0;
    }
    int ok = 1, size = 8;
    switch (format) {
        case 'b': case 'h': case 'i': case 'l': case 'q': {
            size = format == 'b' ? 1 : format == 'h' ? 2 : format == 'i' ? 4 : 8;
            int overflow;
            long long x = PyLong_AsLongLongAndOverflow(i, &overflow);
            if (overflow || (x == -1 && PyErr_Occurred())) ok = 0;
            if (ok && size < 8 && (x < -(1LL << (8 * size - 1)) || x >= (1LL << (8 * size - 1)))) ok = 0;
            if (ok) std::memcpy(slot, &x, size);
            break;
        }
        case 'B': case 'H': case 'I': case 'L': case 'Q': {
            size = format == 'B' ? 1 : format == 'H' ? 2 : format == 'I' ? 4 : 8;
            unsigned long long x = PyLong_AsUnsignedLongLong(i);
            if (x == (unsigned long long)-1 && PyErr_Occurred()) ok = 0;
            if (ok && size < 8 && x >= (1ULL << (8 * size))) ok = 0;
            if (ok) std::memcpy(slot, &x, size);
            break;
        }
        default:
            ok = 0;
    }
    Py_DECREF(i);
    if (!ok) PyErr_Clear();
    return ok;
}

static int raw_pointer(PyObject* a, int kind, uint64_t* out) {  // 1 read, 0 let Python decide, -1 error
    PyObject* p = NULL;
    switch (kind) {
        case RAW_NONE:
            *out = 0;
            return 1;
        case RAW_CUPY: {
            if (cupy_data_ptr(a, out)) return 1;
            PyObject* m = PyObject_GetAttr(a, S_data);
            if (!m) return -1;
            p = PyObject_GetAttr(m, S_ptr);
            Py_DECREF(m);
            break;
        }
        case RAW_TORCH: {
            PyObject* c = PyObject_GetAttr(a, S_is_cuda);
            if (!c) return -1;
            int on_device = PyObject_IsTrue(c);
            Py_DECREF(c);
            if (on_device <= 0) return on_device;  // a host tensor: the packer's error
            p = PyObject_CallMethodNoArgs(a, S_data_ptr);
            break;
        }
        case RAW_KSPEC:
            p = PyObject_GetAttr(a, S_kptr);
            break;
        case RAW_HANDLE:
            p = PyObject_GetAttr(a, S_ptr);
            break;
    }
    if (!p) return -1;
    *out = PyLong_AsUnsignedLongLong(p);
    Py_DECREF(p);
    return (*out == (uint64_t)-1 && PyErr_Occurred()) ? -1 : 1;
}

static PyObject* RawCall_vectorcall(PyObject* op, PyObject* const* argv, size_t nargsf, PyObject* kwnames) {
    RawCall* self = (RawCall*)op;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    PyObject *shared_obj = NULL, *stream = Py_None;
    if (!self->keep) return cleared("raw call");  // `miss` went with it
    if (n != 4) goto python;  // the general launch says what is wrong
    if (kwnames) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); ++i) {
            PyObject* name = PyTuple_GET_ITEM(kwnames, i);
            if (PyUnicode_Compare(name, S_shared_mem) == 0)
                shared_obj = argv[n + i];
            else if (PyUnicode_Compare(name, S_stream) == 0)
                stream = argv[n + i];
            else
                goto python;
        }
        if (PyErr_Occurred()) return NULL;
    }
    {
        PyObject *grid = argv[1], *block = argv[2], *args = argv[3];
        PyObject* shared_arg = shared_obj ? shared_obj : NULL;
        if (PyThread_get_thread_ident() != self->thread || !PyTuple_CheckExact(args) || PyTuple_GET_SIZE(args) != self->n)
            goto miss;
        {
            PyObject* host = PyObject_GetAttr(self->kind_module, S_host_active);
            if (!host) return NULL;
            Py_DECREF(host);
            if (host != self->host) goto miss;
        }
        for (int i = 0; i < self->n; ++i)
            if ((PyObject*)Py_TYPE(PyTuple_GET_ITEM(args, i)) != self->types[i]) goto miss;
        unsigned g[3], b[3], shared = 0;
        if (!raw_dims(grid, g) || !raw_dims(block, b)) goto body;
        if (shared_arg) {
            if (!PyLong_CheckExact(shared_arg)) goto body;
            unsigned long v = PyLong_AsUnsignedLong(shared_arg);
            if (PyErr_Occurred() || v > UINT_MAX) {
                PyErr_Clear();
                goto body;
            }
            shared = (unsigned)v;
        }
        alignas(16) char local[SCRATCH];
        void* small_params[SCRATCH / 8];
        if (self->n * 8 > SCRATCH) goto body;
        for (int i = 0; i < self->n; ++i) {
            PyObject* a = PyTuple_GET_ITEM(args, i);
            char* slot = local + 8 * i;
            small_params[i] = slot;
            if (self->kinds[i] == RAW_SCALAR) {
                if (!raw_scalar(slot, self->formats[i], a)) goto body;
            } else {
                uint64_t value;
                int r = raw_pointer(a, self->kinds[i], &value);
                if (r < 0) return NULL;
                if (r == 0) goto body;
                std::memcpy(slot, &value, 8);
            }
        }
        // the stream: stream=, else an open `with kspec.Stream` block's, else the arrays' library's current one
        PyObject* chosen = NULL;
        if (stream == Py_None) {
            int entered = PyObject_IsTrue(PyList_GET_ITEM(self->entered, 0));
            if (entered < 0) return NULL;
            if (entered) stream = chosen = PyObject_CallNoArgs(self->current_stream);
            if (entered && !chosen) return NULL;
        }
        PyObject* handle_obj;
        uint64_t handle = 0;
        if (stream != Py_None) {
            handle_obj = PyObject_CallOneArg(self->stream_handle, stream);
        } else if (cupy_stream(self->stream_of, 0, &handle)) {  // -1 too: CuPy's error, raised below
            handle_obj = PyErr_Occurred() ? NULL : PyLong_FromUnsignedLongLong(handle);
        } else if (self->stream_of != Py_None) {
            PyObject* zero = PyLong_FromLong(0);
            handle_obj = zero ? PyObject_CallOneArg(self->stream_of, zero) : NULL;
            Py_XDECREF(zero);
            if (handle_obj && self->stream_attr != Py_None) Py_SETREF(handle_obj, PyObject_GetAttr(handle_obj, self->stream_attr));
        } else {
            handle_obj = PyLong_FromLong(0);
        }
        Py_XDECREF(chosen);
        if (!handle_obj) return NULL;
        handle = PyLong_AsUnsignedLongLong(handle_obj);
        if (handle == (uint64_t)-1 && PyErr_Occurred()) {
            Py_DECREF(handle_obj);
            return NULL;
        }
        if (!self->function) {  // the first call: the function on device 0, checked against the signature
            PyObject* zero = PyLong_FromLong(0);
            PyObject* f = zero ? PyObject_CallFunctionObjArgs(self->resolve, zero, handle_obj, NULL) : NULL;
            Py_XDECREF(zero);
            if (!f) {
                Py_DECREF(handle_obj);
                return NULL;
            }
            self->function = PyLong_AsVoidPtr(f);
            Py_DECREF(f);
            if (PyErr_Occurred()) {
                Py_DECREF(handle_obj);
                return NULL;
            }
        }
        Py_DECREF(handle_obj);
        int err = raw_launch_fn(self->function, g[0], g[1], g[2], b[0], b[1], b[2], shared, (void*)(uintptr_t)handle,
                                small_params, NULL);
        if (!err) Py_RETURN_NONE;
        goto body;  // nothing was queued: the packer's error branch retries or raises
    }
body:
    return PyObject_CallFunctionObjArgs(self->body, argv[1], argv[2], argv[3], shared_obj ? shared_obj : ZERO,
                                        stream, NULL);
miss:
    return PyObject_CallFunctionObjArgs(self->miss, argv[1], argv[2], argv[3], shared_obj ? shared_obj : ZERO,
                                        stream, NULL);
python: {  // the call as written, through the launcher's general launch (its errors name what is wrong)
    PyObject* launcher_launch = self->miss;
    return PyObject_Vectorcall(launcher_launch, argv + 1, (n > 0 ? n - 1 : 0), kwnames);
}
}

static int RawCall_traverse(PyObject* op, visitproc visit, void* arg) {
    Py_VISIT(((RawCall*)op)->keep);
    Py_VISIT(Py_TYPE(op));
    return 0;
}

static int RawCall_clear(PyObject* op) {
    RawCall* self = (RawCall*)op;
    PyMem_Free(self->kinds);
    PyMem_Free(self->formats);
    self->kinds = NULL;
    self->formats = NULL;
    Py_CLEAR(self->keep);  // its borrowed pointers go with it
    return 0;
}

static PyMemberDef RawCall_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(RawCall, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot RawCall_slots[] = {
    {Py_tp_call, (void*)PyVectorcall_Call},
    {Py_tp_descr_get, (void*)bind_method},
    {Py_tp_traverse, (void*)RawCall_traverse},
    {Py_tp_clear, (void*)RawCall_clear},
    {Py_tp_dealloc, (void*)gc_dealloc},
    {Py_tp_members, (void*)RawCall_members},
    {Py_tp_doc, (void*)"A raw kernel's __call__ for one signature and thread, in C."},
    {0, NULL},
};

static PyType_Spec RawCall_spec = {
    "kspec_fastcall.RawCall", sizeof(RawCall), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    RawCall_slots,
};
static PyTypeObject* RawCallType;

// raw_call(types, kinds, formats, miss, body, resolve, entered, current_stream, stream_of, stream_attr,
//          stream_handle, kind_module, host) -> RawCall, for the calling thread
static PyObject* make_raw_call(PyObject* module, PyObject* args) {
    if (!PyTuple_Check(args) || PyTuple_GET_SIZE(args) != 13) {
        PyErr_SetString(PyExc_TypeError, "raw_call takes 13 arguments");
        return NULL;
    }
    PyObject *types = PyTuple_GET_ITEM(args, 0), *kinds = PyTuple_GET_ITEM(args, 1), *formats = PyTuple_GET_ITEM(args, 2);
    if (!PyTuple_Check(types) || !PyTuple_Check(kinds) || !PyUnicode_Check(formats) ||
        PyTuple_GET_SIZE(kinds) != PyTuple_GET_SIZE(types) || PyUnicode_GET_LENGTH(formats) != PyTuple_GET_SIZE(types) ||
        !PyList_Check(PyTuple_GET_ITEM(args, 6)) || PyList_GET_SIZE(PyTuple_GET_ITEM(args, 6)) < 1) {
        fail_value("raw call");
        return NULL;
    }
    if (!raw_launch_fn) {
        PyErr_SetString(PyExc_RuntimeError, "kspec fastcall: no driver launch set");
        return NULL;
    }
    RawCall* self = PyObject_GC_New(RawCall, RawCallType);
    if (!self) return NULL;
    self->vectorcall = RawCall_vectorcall;
    self->keep = Py_NewRef(args);
    self->n = (int)PyTuple_GET_SIZE(types);
    self->thread = PyThread_get_thread_ident();
    self->types = &PyTuple_GET_ITEM(types, 0);
    self->kinds = (int*)PyMem_Calloc(self->n + 1, sizeof(int));
    self->formats = (char*)PyMem_Calloc(self->n + 1, 1);
    self->function = NULL;
    PyObject** a = &PyTuple_GET_ITEM(args, 0);
    self->miss = a[3];
    self->body = a[4];
    self->resolve = a[5];
    self->entered = a[6];
    self->current_stream = a[7];
    self->stream_of = a[8];
    self->stream_attr = a[9];
    self->stream_handle = a[10];
    self->kind_module = a[11];
    self->host = a[12];
    PyObject_GC_Track(self);
    if (!self->kinds || !self->formats) {
        PyErr_NoMemory();
        Py_DECREF(self);
        return NULL;
    }
    const char* f = PyUnicode_AsUTF8(formats);
    for (int i = 0; f && i < self->n; ++i) {
        self->kinds[i] = (int)PyLong_AsLong(PyTuple_GET_ITEM(kinds, i));
        self->formats[i] = f[i];
        if (self->kinds[i] < RAW_SCALAR || self->kinds[i] > RAW_HANDLE) fail_value("raw kind");
    }
    if (PyErr_Occurred()) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject*)self;
}
