// The dispatcher of one argument-type tuple: reads the key and pointers (kspec/kernels/callpath/_signature.py's READS), finds
// the prepared call and runs its launch.

// CUPY_LAYOUT(_SEVERAL): a CuPy type whose key attributes are _ndarray_base's, read through its layout
// (05_cupy_layout.cc); the dispatcher makes them from CUPY(_SEVERAL), never the caller.
enum Kind {
    SCALAR = 0, CUPY = 1, TORCH = 2, KSPEC = 3, HOST = 4, CUPY_SEVERAL = 5, KSPEC_SEVERAL = 6, CAI = 7,
    CUPY_LAYOUT = 8, CUPY_LAYOUT_SEVERAL = 9
};
static const int KEY_ITEMS[] = {0, 3, 4, 3, 4, 4, 4, 1, 3, 4};

struct Dispatch {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject* keep;
    int n;
    Py_ssize_t nkey;
    PyObject** types;  // borrowed from keep
    int* kinds;
    PyObject *table, *entered, *current_stream, *host_ok, *host_kind, *miss;
};

static PyObject* Dispatch_vectorcall(PyObject* op, PyObject* const* argv, size_t nargsf, PyObject* kwnames);

// dispatcher(types, kinds, table, entered, current_stream, host_ok, host_kind, miss)
static PyObject* make_dispatch(PyObject* module, PyObject* args) {
    PyObject *types, *kinds, *table, *entered, *current_stream, *host_ok, *host_kind, *miss;
    if (!PyArg_ParseTuple(args, "O!O!O!O!OOOO", &PyTuple_Type, &types, &PyTuple_Type, &kinds, &PyDict_Type, &table,
                          &PyList_Type, &entered, &current_stream, &host_ok, &host_kind, &miss))
        return NULL;
    if (PyTuple_GET_SIZE(types) != PyTuple_GET_SIZE(kinds) || PyList_GET_SIZE(entered) < 1) {
        fail_value("dispatcher");
        return NULL;
    }
    Dispatch* self = PyObject_GC_New(Dispatch, DispatchType);
    if (!self) return NULL;
    self->vectorcall = Dispatch_vectorcall;
    self->keep = Py_BuildValue("(OOOOOOOO)", types, kinds, table, entered, current_stream, host_ok, host_kind, miss);
    self->n = (int)PyTuple_GET_SIZE(types);
    self->kinds = (int*)PyMem_Calloc(self->n + 1, sizeof(int));
    self->types = &PyTuple_GET_ITEM(types, 0);
    self->table = table;
    self->entered = entered;
    self->current_stream = current_stream;
    self->host_ok = host_ok;
    self->host_kind = host_kind;
    self->miss = miss;
    self->nkey = 1;
    PyObject_GC_Track(self);
    if (!self->keep || !self->kinds) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        Py_DECREF(self);
        return NULL;
    }
    for (int i = 0; i < self->n; ++i) {
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(kinds, i));
        if (kind < 0 || kind > CAI || !PyType_Check(self->types[i])) {
            if (!PyErr_Occurred()) fail_value("kind");
            Py_DECREF(self);
            return NULL;
        }
        if ((kind == CUPY || kind == CUPY_SEVERAL) && reads_layout((PyTypeObject*)self->types[i]))
            kind = kind == CUPY ? CUPY_LAYOUT : CUPY_LAYOUT_SEVERAL;
        self->kinds[i] = (int)kind;
        self->nkey += KEY_ITEMS[kind];
    }
    return (PyObject*)self;
}

// An array known only by its __cuda_array_interface__ (kspec/kernels/callpath/_signature.py's cai_entry, in C): its
// key (type, shape, typestr, strides, read-only), pointer and producer stream. 1: read; 0: the call plans
// (what binding refuses or explains: no dict, a mask, an old version, a malformed entry); -1: an error.
static int read_cai(PyObject* a, PyObject** key, uint64_t* ptr, PyObject** producer) {
    PyObject* cai = PyObject_GetAttr(a, S_cai);
    if (!cai) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
        PyErr_Clear();
        return 0;
    }
    int got = 0;
    PyObject *shape = NULL, *strides = NULL, *k = NULL;
    if (PyDict_CheckExact(cai)) {
        PyObject* mask = PyDict_GetItemWithError(cai, S_mask);
        PyObject* version = PyDict_GetItemWithError(cai, S_version);
        PyObject* data = PyDict_GetItemWithError(cai, S_data);
        PyObject* typestr = PyDict_GetItemWithError(cai, S_typestr);
        PyObject* shape_in = PyDict_GetItemWithError(cai, S_shape);
        PyObject* strides_in = PyDict_GetItemWithError(cai, S_strides);
        if (PyErr_Occurred()) goto error;
        if ((mask && mask != Py_None) || !version || !PyLong_CheckExact(version) || !data || !typestr || !shape_in)
            goto done;
        long v = PyLong_AsLong(version);
        if (v == -1 && PyErr_Occurred()) goto unkeyable;
        if (v < 2 || !PyTuple_Check(data) || PyTuple_GET_SIZE(data) < 2) goto done;
        if (!(shape = PySequence_Tuple(shape_in))) goto unkeyable;
        if (strides_in && strides_in != Py_None) {
            if (!(strides = PySequence_Tuple(strides_in))) goto unkeyable;
        } else {
            strides = Py_NewRef(Py_None);
        }
        int readonly = PyObject_IsTrue(PyTuple_GET_ITEM(data, 1));
        if (readonly < 0) goto unkeyable;
        k = Py_BuildValue("(OOOOO)", (PyObject*)Py_TYPE(a), shape, typestr, strides, readonly ? Py_True : Py_False);
        if (!k || PyObject_Hash(k) == -1) goto unkeyable;
        PyObject* p = PyTuple_GET_ITEM(data, 0);
        if (p == Py_None) {
            *ptr = 0;
        } else {
            PyObject* i = PyNumber_Long(p);
            if (!i) goto unkeyable;
            *ptr = PyLong_AsUnsignedLongLong(i);
            Py_DECREF(i);
            if (*ptr == (uint64_t)-1 && PyErr_Occurred()) goto unkeyable;
        }
        PyObject* stream = PyDict_GetItemWithError(cai, S_stream_key);
        if (PyErr_Occurred()) goto error;
        *producer = stream == Py_None ? NULL : Py_XNewRef(stream);
        *key = k;
        k = NULL;
        got = 1;
    }
    goto done;
unkeyable:  // what cai_entry answers None for: the planner explains (or refuses) it
    if (!(PyErr_ExceptionMatches(PyExc_KeyError) || PyErr_ExceptionMatches(PyExc_TypeError) ||
          PyErr_ExceptionMatches(PyExc_IndexError) || PyErr_ExceptionMatches(PyExc_ValueError)))
        goto error;
    PyErr_Clear();
done:
    Py_DECREF(cai);
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    Py_XDECREF(k);
    return got;
error:
    got = -1;
    Py_DECREF(cai);
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    Py_XDECREF(k);
    return got;
}

// Whether PyTorch's autograd records a call on tensor `a`: it requires grad and grad mode is on. Such a call
// takes the miss path, which hands it to kspec.torch (kspec/kernels/callpath/_frameworks.py's run_by_torch). 1: records;
// 0: no; -1: an error. torch.is_grad_enabled is looked up the first time a tensor requires grad.
static PyObject* grad_mode_on = NULL;

static int torch_records(PyObject* a) {
    PyObject* requires = PyObject_GetAttr(a, S_requires_grad);
    if (!requires) return -1;
    int needs = requires == Py_True;
    Py_DECREF(requires);
    if (!needs) return 0;
    if (!grad_mode_on) {
        PyObject* torch = PyImport_GetModule(S_torch);  // imported: `a` is one of its tensors
        if (!torch) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "kspec fastcall: a tensor without torch");
            return -1;
        }
        grad_mode_on = PyObject_GetAttr(torch, S_is_grad_enabled);
        Py_DECREF(torch);
        if (!grad_mode_on) return -1;
    }
    PyObject* on = PyObject_CallNoArgs(grad_mode_on);
    if (!on) return -1;
    int records = on == Py_True;
    Py_DECREF(on);
    return records;
}

// Append an argument's key items to `key` from `*at` and read its pointer (the reads of
// kspec/kernels/callpath/_signature.py's READS). 1: a key; 0: the call cannot be keyed (MISS); -1: an error.
static int read_argument(Dispatch* self, PyObject* a, int kind, PyObject* key, Py_ssize_t* at, uint64_t* ptr,
                         PyObject** producer) {
    PyObject *p = NULL, *m = NULL;
    PyObject* items[4] = {NULL, NULL, NULL, NULL};
    int n = KEY_ITEMS[kind];
    switch (kind) {
        case SCALAR:
            *ptr = 0;
            return 1;
        case CAI: {
            PyObject* k = NULL;
            int r = read_cai(a, &k, ptr, producer);
            if (r == 1) PyTuple_SET_ITEM(key, (*at)++, k);
            return r;
        }
        case CUPY_LAYOUT:
        case CUPY_LAYOUT_SEVERAL: {
            int r = cupy_read(a, items, kind == CUPY_LAYOUT_SEVERAL, ptr);
            if (r == 0) return read_argument(self, a, kind == CUPY_LAYOUT ? CUPY : CUPY_SEVERAL, key, at, ptr, producer);
            if (r > 0)
                for (int i = 0; i < n; ++i) PyTuple_SET_ITEM(key, (*at)++, items[i]);
            else
                for (int i = 0; i < n; ++i) Py_XDECREF(items[i]);
            return r;
        }
        case CUPY:
        case CUPY_SEVERAL:
            items[0] = PyObject_GetAttr(a, S_shape);
            items[1] = PyObject_GetAttr(a, S_strides);
            items[2] = PyObject_GetAttr(a, S_dtype);
            m = PyObject_GetAttr(a, S_data);
            if (m) {
                if (kind == CUPY_SEVERAL) items[3] = PyObject_GetAttr(m, S_device_id);
                p = PyObject_GetAttr(m, S_ptr);
                Py_DECREF(m);
            }
            break;
        case TORCH: {
            int records = torch_records(a);
            if (records != 0) return records < 0 ? -1 : 0;  // recorded: the miss path hands it on
            items[0] = PyObject_GetAttr(a, S_shape);
            items[1] = PyObject_CallMethodNoArgs(a, S_stride);
            items[2] = PyObject_GetAttr(a, S_dtype);
            items[3] = PyObject_CallMethodNoArgs(a, S_get_device);
            p = PyObject_CallMethodNoArgs(a, S_data_ptr);
            break;
        }
        case KSPEC:
        case KSPEC_SEVERAL:
            items[0] = PyObject_GetAttr(a, S_kshape);
            items[1] = PyObject_GetAttr(a, S_kstrides);
            items[2] = PyObject_GetAttr(a, S_kdtype);
            if (kind == KSPEC_SEVERAL) items[3] = PyObject_GetAttr(a, S_kdevice);
            p = PyObject_GetAttr(a, S_kptr);
            break;
        case HOST: {
            PyObject* ok = PyObject_CallOneArg(self->host_ok, self->host_kind);  // the CPU device may have changed
            if (!ok) return -1;
            int yes = PyObject_IsTrue(ok);
            Py_DECREF(ok);
            if (yes <= 0) return yes;
            items[0] = PyObject_GetAttr(a, S_shape);
            items[1] = PyObject_GetAttr(a, S_strides);
            items[2] = PyObject_GetAttr(a, S_dtype);
            PyObject* flags = PyObject_GetAttr(a, S_flags);
            if (flags) {
                items[3] = PyObject_GetAttr(flags, S_writeable);
                Py_DECREF(flags);
            }
            PyObject* c = PyObject_GetAttr(a, S_ctypes);
            if (c) {
                p = PyObject_GetAttr(c, S_data);
                Py_DECREF(c);
            }
            break;
        }
    }
    int ok = p != NULL;
    for (int i = 0; i < n; ++i) ok = ok && items[i] != NULL;
    if (ok) {
        *ptr = PyLong_AsUnsignedLongLong(p);
        ok = !(*ptr == (uint64_t)-1 && PyErr_Occurred());
    }
    Py_XDECREF(p);
    for (int i = 0; i < n; ++i) {
        if (ok)
            PyTuple_SET_ITEM(key, (*at)++, items[i]);  // the reference moves into the key
        else
            Py_XDECREF(items[i]);
    }
    return ok ? 1 : -1;
}

// dispatch(args, stream=None, extra=None): the prepared call's result, or MISS.
static PyObject* Dispatch_vectorcall(PyObject* op, PyObject* const* argv, size_t nargsf, PyObject* kwnames) {
    Dispatch* self = (Dispatch*)op;
    if (!self->keep) return cleared("dispatcher");
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    PyObject* positional[3] = {NULL, Py_None, Py_None};
    if (n > 3) {
        PyErr_SetString(PyExc_TypeError, "dispatch(args, stream=None, extra=None) takes at most 3 arguments");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; ++i) positional[i] = argv[i];
    if (kwnames) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); ++i) {
            PyObject* name = PyTuple_GET_ITEM(kwnames, i);
            int slot = PyUnicode_Compare(name, S_stream) == 0 ? 1 : PyUnicode_Compare(name, S_extra) == 0 ? 2 : 0;
            if (!slot) {
                PyErr_Format(PyExc_TypeError, "dispatch() got an unexpected keyword argument %R", name);
                return NULL;
            }
            positional[slot] = argv[n + i];
        }
    }
    PyObject *args = positional[0], *stream = positional[1], *extra = positional[2];
    if (!args) {
        PyErr_SetString(PyExc_TypeError, "dispatch() missing the argument tuple");
        return NULL;
    }
    if (!PyTuple_CheckExact(args) || PyTuple_GET_SIZE(args) != self->n) return Py_NewRef(self->miss);
    for (int i = 0; i < self->n; ++i)
        if ((PyObject*)Py_TYPE(PyTuple_GET_ITEM(args, i)) != self->types[i]) return Py_NewRef(self->miss);
    uint64_t small[SMALL];
    uint64_t* ptrs = self->n <= SMALL ? small : (uint64_t*)PyMem_Calloc(self->n, sizeof(uint64_t));
    PyObject *key = PyTuple_New(self->nkey), *result = NULL, *prepared = NULL, *launch = NULL, *chosen = NULL;
    PyObject* producers = NULL;  // a list of the CAI producers' streams, where any is given
    if (!ptrs || !key) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto done;
    }
    {
        PyTuple_SET_ITEM(key, 0, Py_NewRef(extra));
        Py_ssize_t at = 1;
        for (int i = 0; i < self->n; ++i) {
            PyObject* producer = NULL;
            int r = read_argument(self, PyTuple_GET_ITEM(args, i), self->kinds[i], key, &at, &ptrs[i], &producer);
            if (producer) {
                if (!producers && !(producers = PyList_New(0))) r = -1;
                if (producers && PyList_Append(producers, producer) < 0) r = -1;
                Py_DECREF(producer);
            }
            if (r < 0) goto done;
            if (r == 0) {
                result = Py_NewRef(self->miss);
                goto done;
            }
        }
        prepared = PyDict_GetItemWithError(self->table, key);
        if (!prepared) {
            if (!PyErr_Occurred()) result = Py_NewRef(self->miss);
            goto done;
        }
        Py_INCREF(prepared);
        if (stream == Py_None) {  // inside `with kspec.Stream(...)`: that block's stream
            int entered = PyObject_IsTrue(PyList_GET_ITEM(self->entered, 0));
            if (entered < 0) goto done;
            if (entered) {
                chosen = PyObject_CallNoArgs(self->current_stream);
                if (!chosen) goto done;
                stream = chosen;
            }
        }
        if (producers) {  // CAI inputs: their producers' streams, ordered before the launch
            PyObject* r = PyObject_CallMethod(prepared, "order_producers", "OO", producers, stream);
            if (!r) goto done;
            Py_DECREF(r);
        }
        launch = PyObject_GetAttr(prepared, S_launch);
        if (!launch) goto done;
        if (Py_TYPE(launch) == FastLaunchType) {
            result = run_launch((FastLaunch*)launch, args, stream, ptrs);
        } else {  // the Python launch (outputs exported to another framework)
            PyObject* small_argv[2 + SMALL];
            PyObject** call = self->n <= SMALL ? small_argv : (PyObject**)PyMem_Calloc(2 + self->n, sizeof(PyObject*));
            if (!call) {
                PyErr_NoMemory();
                goto done;
            }
            call[0] = args;
            call[1] = stream;
            int made = 0;
            for (; made < self->n; ++made)
                if (!(call[2 + made] = PyLong_FromUnsignedLongLong(ptrs[made]))) break;
            if (made == self->n) result = PyObject_Vectorcall(launch, call, 2 + self->n, NULL);
            for (int i = 0; i < made; ++i) Py_DECREF(call[2 + i]);
            if (call != small_argv) PyMem_Free(call);
        }
    }
done:
    Py_XDECREF(key);
    Py_XDECREF(producers);
    Py_XDECREF(prepared);
    Py_XDECREF(launch);
    Py_XDECREF(chosen);
    if (ptrs && ptrs != small) PyMem_Free(ptrs);
    return result;
}

static int Dispatch_traverse(PyObject* op, visitproc visit, void* arg) {
    Py_VISIT(((Dispatch*)op)->keep);
    Py_VISIT(Py_TYPE(op));
    return 0;
}

static int Dispatch_clear(PyObject* op) {
    Dispatch* self = (Dispatch*)op;
    PyMem_Free(self->kinds);
    self->kinds = NULL;
    Py_CLEAR(self->keep);  // its borrowed pointers go with it
    return 0;
}

static PyObject* Dispatch_kinds(PyObject* op, void*) {  // what each argument is read as (tests)
    Dispatch* self = (Dispatch*)op;
    if (!self->keep) return cleared("dispatcher");
    PyObject* t = PyTuple_New(self->n);
    for (int i = 0; t && i < self->n; ++i) {
        PyObject* k = PyLong_FromLong(self->kinds[i]);
        if (!k) Py_CLEAR(t);
        else PyTuple_SET_ITEM(t, i, k);
    }
    return t;
}

static PyGetSetDef Dispatch_getset[] = {
    {"kinds", Dispatch_kinds, NULL, "per argument its read: 8 and 9 are CuPy's layout (05_cupy_layout.cc)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef Dispatch_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Dispatch, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot Dispatch_slots[] = {
    {Py_tp_call, (void*)PyVectorcall_Call},
    {Py_tp_traverse, (void*)Dispatch_traverse},
    {Py_tp_clear, (void*)Dispatch_clear},
    {Py_tp_dealloc, (void*)gc_dealloc},
    {Py_tp_members, (void*)Dispatch_members},
    {Py_tp_getset, (void*)Dispatch_getset},
    {Py_tp_doc, (void*)"One argument-type tuple's dispatcher in C: dispatch(args, stream=None, extra=None)."},
    {0, NULL},
};

static PyType_Spec Dispatch_spec = {
    "kspec_fastcall.Dispatch", sizeof(Dispatch), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL, Dispatch_slots,
};
