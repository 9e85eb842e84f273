// A raw kernel's launch: cuda.bindings' cuLaunchKernel signature, taking ints (kspec/runtime/_packer.py)

static cu_launch_t raw_launch_fn = NULL;

static PyObject* set_raw_launch(PyObject* module, PyObject* address) {  // -> the address it replaces
    void* p = PyLong_AsVoidPtr(address);
    if (!p && PyErr_Occurred()) return NULL;
    void* before = (void*)raw_launch_fn;
    raw_launch_fn = (cu_launch_t)p;
    return PyLong_FromVoidPtr(before);
}

static int as_dim(PyObject* o, unsigned* out) {
    PyObject* i = PyNumber_Index(o);  // a float or a string is a TypeError, as the bindings' is
    if (!i) return -1;
    unsigned long v = PyLong_AsUnsignedLong(i);
    Py_DECREF(i);
    if (v == (unsigned long)-1 && PyErr_Occurred()) return -1;
    if (v > UINT_MAX) {
        PyErr_SetString(PyExc_OverflowError, "value too large to convert to unsigned int");
        return -1;
    }
    *out = (unsigned)v;
    return 0;
}

// launch_kernel(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra) -> (CUresult,): f, stream and params
// as ints (the CUfunction, the stream handle, the void** address), extra 0.
static PyObject* launch_kernel(PyObject* module, PyObject* const* argv, Py_ssize_t n) {
    if (n != 11) {
        PyErr_SetString(PyExc_TypeError, "launch_kernel takes 11 arguments");
        return NULL;
    }
    if (!raw_launch_fn) {
        PyErr_SetString(PyExc_RuntimeError, "kspec fastcall: no driver launch set");
        return NULL;
    }
    unsigned dims[7];
    for (int i = 0; i < 7; ++i)
        if (as_dim(argv[1 + i], &dims[i]) < 0) return NULL;
    void* f = PyLong_AsVoidPtr(argv[0]);
    void* stream = PyLong_AsVoidPtr(argv[8]);
    void* params = PyLong_AsVoidPtr(argv[9]);
    if (PyErr_Occurred()) return NULL;
    int err = raw_launch_fn(f, dims[0], dims[1], dims[2], dims[3], dims[4], dims[5], dims[6], stream, (void**)params,
                            NULL);
    PyObject* code = PyLong_FromLong(err);
    if (!code) return NULL;
    PyObject* r = PyTuple_Pack(1, code);
    Py_DECREF(code);
    return r;
}
