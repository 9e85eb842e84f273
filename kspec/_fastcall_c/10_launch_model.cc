// A prepared launch's description (kspec/kernels/callpath/_launch_native.py makes it): parsed once into C structs.

struct PtrWrite {
    Py_ssize_t offset;
    int source;  // argument position >= 0, output k as -1 - k, or WORKSPACE_SOURCE
};
struct ScalarWrite {
    Py_ssize_t offset;
    int position;
    char format;      // a struct format letter for Python ints and floats, 0: always the packer
    PyObject* slow;   // value -> bytes (every error of a bad value is raised there)
};
struct Step {
    PyObject *fn, *what;
    void* handle;  // the CUfunction (direct launches)
    unsigned grid, block;
    int dependent;
    const char* statics;
    Py_ssize_t size, at, params_at, nslots, nptrs, nscalars;
    Py_ssize_t* slots;
    PtrWrite* ptrs;
    ScalarWrite* scalars;
};
struct Output {
    PyObject *quick, *dtype;
    int like, pointer;  // pointer: 0 `.data.ptr` (CuPy), 1 `.data_ptr()` (PyTorch), 2 `pointer_of(o)`
};

struct FastLaunch {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject* keep;
    PyObject* streams;  // handle -> the driver's stream object, for launches made through Python
    int nargs, nsteps, nouts, form, nitems;
    Step* steps;
    Output* outs;
    int* items;
    Py_ssize_t scratch, workspace;
    int cupy_device;  // >= 0: the device whose `stream_of(device).ptr` is the default stream (05_cupy_layout.cc)
    cu_launch_t cu_launch;
    PyObject *device, *library, *shape, *stream_of, *stream_attr, *choose_stream, *py_launch, *cu_stream,
        *launch_dependent, *relaunch, *allocate, *allocate_bytes, *activate, *pointer_of, *empty_like;
};

static int fail_value(const char* what) {
    PyErr_Format(PyExc_ValueError, "kspec fastcall: bad description (%s)", what);
    return -1;
}

static int as_index(PyObject* o, Py_ssize_t* out) {
    *out = PyLong_AsSsize_t(o);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

static int parse_step(FastLaunch* self, PyObject* t, Step* st, Py_ssize_t* scratch) {
    // (fn, handle, grid, block, dependent, what, static, slots, ptrs, scalars)
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 10) return fail_value("step");
    st->fn = PyTuple_GET_ITEM(t, 0);
    st->handle = PyLong_AsVoidPtr(PyTuple_GET_ITEM(t, 1));
    st->grid = (unsigned)PyLong_AsUnsignedLong(PyTuple_GET_ITEM(t, 2));
    st->block = (unsigned)PyLong_AsUnsignedLong(PyTuple_GET_ITEM(t, 3));
    st->dependent = PyObject_IsTrue(PyTuple_GET_ITEM(t, 4));
    st->what = PyTuple_GET_ITEM(t, 5);
    if (PyErr_Occurred()) return -1;
    PyObject* statics = PyTuple_GET_ITEM(t, 6);
    PyObject *slots = PyTuple_GET_ITEM(t, 7), *ptrs = PyTuple_GET_ITEM(t, 8), *scalars = PyTuple_GET_ITEM(t, 9);
    if (!PyBytes_Check(statics) || !PyTuple_Check(slots) || !PyTuple_Check(ptrs) || !PyTuple_Check(scalars))
        return fail_value("step fields");
    st->statics = PyBytes_AS_STRING(statics);
    st->size = PyBytes_GET_SIZE(statics);
    st->nslots = PyTuple_GET_SIZE(slots);
    st->nptrs = PyTuple_GET_SIZE(ptrs);
    st->nscalars = PyTuple_GET_SIZE(scalars);
    st->slots = (Py_ssize_t*)PyMem_Calloc(st->nslots + 1, sizeof(Py_ssize_t));
    st->ptrs = (PtrWrite*)PyMem_Calloc(st->nptrs + 1, sizeof(PtrWrite));
    st->scalars = (ScalarWrite*)PyMem_Calloc(st->nscalars + 1, sizeof(ScalarWrite));
    if (!st->slots || !st->ptrs || !st->scalars) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t s = 0; s < st->nslots; ++s) {
        if (as_index(PyTuple_GET_ITEM(slots, s), &st->slots[s]) < 0) return -1;
        if (st->slots[s] < 0 || st->slots[s] >= st->size) return fail_value("slot offset");
    }
    for (Py_ssize_t s = 0; s < st->nptrs; ++s) {
        PyObject* w = PyTuple_GET_ITEM(ptrs, s);
        Py_ssize_t source;
        if (!PyTuple_Check(w) || PyTuple_GET_SIZE(w) != 2) return fail_value("pointer write");
        if (as_index(PyTuple_GET_ITEM(w, 0), &st->ptrs[s].offset) < 0) return -1;
        if (as_index(PyTuple_GET_ITEM(w, 1), &source) < 0) return -1;
        st->ptrs[s].source = source == -1000000 ? WORKSPACE_SOURCE : (int)source;
        if (st->ptrs[s].offset < 0 || st->ptrs[s].offset + 8 > st->size) return fail_value("pointer offset");
        if (source >= self->nargs) return fail_value("pointer source");
    }
    for (Py_ssize_t s = 0; s < st->nscalars; ++s) {
        PyObject* w = PyTuple_GET_ITEM(scalars, s);
        Py_ssize_t position;
        if (!PyTuple_Check(w) || PyTuple_GET_SIZE(w) != 4 || !PyUnicode_Check(PyTuple_GET_ITEM(w, 2)))
            return fail_value("scalar write");
        if (as_index(PyTuple_GET_ITEM(w, 0), &st->scalars[s].offset) < 0) return -1;
        if (as_index(PyTuple_GET_ITEM(w, 1), &position) < 0) return -1;
        if (position < 0 || position >= self->nargs || st->scalars[s].offset < 0 || st->scalars[s].offset >= st->size)
            return fail_value("scalar position");
        st->scalars[s].position = (int)position;
        const char* f = PyUnicode_AsUTF8(PyTuple_GET_ITEM(w, 2));
        st->scalars[s].format = f ? f[0] : 0;
        st->scalars[s].slow = PyTuple_GET_ITEM(w, 3);
    }
    // this step's buffer and its void* array, 16-byte aligned, in the call's scratch area
    st->at = *scratch;
    *scratch += (st->size + 15) & ~(Py_ssize_t)15;
    st->params_at = *scratch;
    *scratch += ((st->nslots + 1) * (Py_ssize_t)sizeof(void*) + 15) & ~(Py_ssize_t)15;
    return 0;
}

static PyObject* FastLaunch_vectorcall(PyObject* self, PyObject* const* argv, size_t nargsf, PyObject* kwnames);

static PyTypeObject* FastLaunchType;
static PyTypeObject* DispatchType;

// fast_launch(steps, outputs, result, consts): see kspec/kernels/callpath/_launch_native.py, which makes the description.
static PyObject* make_fast_launch(PyObject* module, PyObject* args) {
    PyObject *steps, *outputs, *result, *consts;
    if (!PyArg_ParseTuple(args, "O!O!O!O!", &PyTuple_Type, &steps, &PyTuple_Type, &outputs, &PyTuple_Type, &result,
                          &PyTuple_Type, &consts))
        return NULL;
    FastLaunch* self = PyObject_GC_New(FastLaunch, FastLaunchType);
    if (!self) return NULL;
    self->vectorcall = FastLaunch_vectorcall;
    self->keep = Py_BuildValue("(OOOO)", steps, outputs, result, consts);
    self->streams = PyDict_New();
    self->steps = NULL;
    self->outs = NULL;
    self->items = NULL;
    self->nsteps = self->nouts = self->nitems = 0;
    PyObject_GC_Track(self);
    if (!self->keep || !self->streams) goto error;
    {
        // consts: (nargs, device, library, shape, stream_of, stream_attr, choose_stream, launch_address, py_launch,
        //          cu_stream, launch_dependent, relaunch, allocate, allocate_bytes, workspace, activate, pointer_of,
        //          empty_like)
        if (PyTuple_GET_SIZE(consts) != 18) {
            fail_value("consts");
            goto error;
        }
        PyObject** c = &PyTuple_GET_ITEM(consts, 0);
        self->nargs = (int)PyLong_AsLong(c[0]);
        self->device = c[1];
        self->library = c[2];
        self->shape = c[3];
        self->stream_of = c[4];
        self->stream_attr = c[5];
        self->choose_stream = c[6];
        self->cu_launch = (cu_launch_t)PyLong_AsVoidPtr(c[7]);
        self->py_launch = c[8];
        self->cu_stream = c[9];
        self->launch_dependent = c[10];
        self->relaunch = c[11];
        self->allocate = c[12];
        self->allocate_bytes = c[13];
        self->workspace = PyLong_AsSsize_t(c[14]);
        self->activate = c[15];
        self->pointer_of = c[16];
        self->empty_like = c[17];
        if (PyErr_Occurred()) goto error;
        self->cupy_device = -1;
        if (PyUnicode_Check(self->stream_attr) &&
            PyUnicode_Compare(self->stream_attr, S_ptr) == 0 && PyLong_Check(self->device)) {
            long d = PyLong_AsLong(self->device);
            if (d == -1 && PyErr_Occurred()) goto error;
            self->cupy_device = d >= 0 && d <= INT_MAX ? (int)d : -1;
        }
        self->nsteps = (int)PyTuple_GET_SIZE(steps);
        self->steps = (Step*)PyMem_Calloc(self->nsteps + 1, sizeof(Step));
        if (!self->steps) {
            PyErr_NoMemory();
            goto error;
        }
        Py_ssize_t scratch = 0;
        for (int j = 0; j < self->nsteps; ++j)
            if (parse_step(self, PyTuple_GET_ITEM(steps, j), &self->steps[j], &scratch) < 0) goto error;
        self->scratch = scratch;
        self->nouts = (int)PyTuple_GET_SIZE(outputs);
        self->outs = (Output*)PyMem_Calloc(self->nouts + 1, sizeof(Output));
        if (!self->outs) {
            PyErr_NoMemory();
            goto error;
        }
        for (int k = 0; k < self->nouts; ++k) {  // (quick or None, like or -1, dtype, pointer kind)
            PyObject* o = PyTuple_GET_ITEM(outputs, k);
            if (!PyTuple_Check(o) || PyTuple_GET_SIZE(o) != 4) {
                fail_value("output");
                goto error;
            }
            self->outs[k].quick = PyTuple_GET_ITEM(o, 0);
            self->outs[k].like = (int)PyLong_AsLong(PyTuple_GET_ITEM(o, 1));
            self->outs[k].dtype = PyTuple_GET_ITEM(o, 2);
            self->outs[k].pointer = (int)PyLong_AsLong(PyTuple_GET_ITEM(o, 3));
            if (PyErr_Occurred()) goto error;
            if (self->outs[k].like >= self->nargs) {
                fail_value("output like");
                goto error;
            }
        }
        // result: (form, items): form 0 None, 1 the one item, 2 a tuple; an item is an argument position or -1 - k
        if (PyTuple_GET_SIZE(result) != 2 || !PyTuple_Check(PyTuple_GET_ITEM(result, 1))) {
            fail_value("result");
            goto error;
        }
        PyObject* items = PyTuple_GET_ITEM(result, 1);
        self->form = (int)PyLong_AsLong(PyTuple_GET_ITEM(result, 0));
        self->nitems = (int)PyTuple_GET_SIZE(items);
        self->items = (int*)PyMem_Calloc(self->nitems + 1, sizeof(int));
        if (!self->items) {
            PyErr_NoMemory();
            goto error;
        }
        for (int i = 0; i < self->nitems; ++i) {
            self->items[i] = (int)PyLong_AsLong(PyTuple_GET_ITEM(items, i));
            if (self->items[i] >= self->nargs || self->items[i] < -self->nouts) {
                fail_value("result item");
                goto error;
            }
        }
        if (PyErr_Occurred()) goto error;
        if (self->form == 1 && self->nitems != 1) {
            fail_value("result form");
            goto error;
        }
    }
    return (PyObject*)self;
error:
    Py_DECREF(self);
    return NULL;
}
