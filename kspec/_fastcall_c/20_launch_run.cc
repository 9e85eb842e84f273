// A prepared launch's call: scalars, outputs, workspace, stream, cuLaunchKernel, the result.

static int pack_scalar(char* dst, Py_ssize_t room, const ScalarWrite* w, PyObject* v) {
    double d;
    long long x;
    unsigned long long u;
    int overflow;
    switch (w->format) {
        case 'f':
        case 'd':
            if (PyFloat_CheckExact(v)) {
                d = PyFloat_AS_DOUBLE(v);
            } else if (PyLong_CheckExact(v)) {
                d = PyLong_AsDouble(v);
                if (d == -1.0 && PyErr_Occurred()) {
                    PyErr_Clear();
                    goto slow;
                }
            } else {
                goto slow;
            }
            if (w->format == 'd') {
                if (room < 8) goto slow;
                std::memcpy(dst, &d, 8);
            } else {
                float f = (float)d;
                if (std::isinf(f) && !std::isinf(d)) goto slow;  // what struct refuses: the packer's rules decide
                if (room < 4) goto slow;
                std::memcpy(dst, &f, 4);
            }
            return 0;
        case 'b':
        case 'h':
        case 'i':
        case 'q': {
            if (!PyLong_CheckExact(v)) goto slow;
            x = PyLong_AsLongLongAndOverflow(v, &overflow);
            if (overflow || (x == -1 && PyErr_Occurred())) {
                PyErr_Clear();
                goto slow;
            }
            int size = w->format == 'b' ? 1 : w->format == 'h' ? 2 : w->format == 'i' ? 4 : 8;
            if (size < 8) {
                long long lim = 1LL << (8 * size - 1);
                if (x < -lim || x >= lim) goto slow;
            }
            if (room < size) goto slow;
            std::memcpy(dst, &x, size);  // little-endian: the low bytes
            return 0;
        }
        case 'B':
        case 'H':
        case 'I':
        case 'Q': {
            if (!PyLong_CheckExact(v)) goto slow;
            u = PyLong_AsUnsignedLongLong(v);
            if (u == (unsigned long long)-1 && PyErr_Occurred()) {
                PyErr_Clear();
                goto slow;
            }
            int size = w->format == 'B' ? 1 : w->format == 'H' ? 2 : w->format == 'I' ? 4 : 8;
            if (size < 8 && u >= (1ULL << (8 * size))) goto slow;
            if (room < size) goto slow;
            std::memcpy(dst, &u, size);
            return 0;
        }
        default:
            break;
    }
slow: {
    PyObject* b = PyObject_CallOneArg(w->slow, v);
    if (!b) return -1;
    char* p;
    Py_ssize_t n;
    if (PyBytes_AsStringAndSize(b, &p, &n) < 0) {
        Py_DECREF(b);
        return -1;
    }
    if (n > room) {
        Py_DECREF(b);
        PyErr_SetString(PyExc_ValueError, "kspec fastcall: a scalar's bytes overrun its parameter buffer");
        return -1;
    }
    std::memcpy(dst, p, n);
    Py_DECREF(b);
    return 0;
}
}

static int read_pointer(PyObject* o, int kind, PyObject* pointer_of, uint64_t* out) {
    PyObject* p;
    if (kind == 0 && cupy_data_ptr(o, out)) return 0;
    if (kind == 0) {
        PyObject* m = PyObject_GetAttr(o, S_data);
        if (!m) return -1;
        p = PyObject_GetAttr(m, S_ptr);
        Py_DECREF(m);
    } else if (kind == 1) {
        p = PyObject_CallMethodNoArgs(o, S_data_ptr);
    } else {
        p = PyObject_CallOneArg(pointer_of, o);
    }
    if (!p) return -1;
    *out = PyLong_AsUnsignedLongLong(p);
    Py_DECREF(p);
    return (*out == (uint64_t)-1 && PyErr_Occurred()) ? -1 : 0;
}

// The driver's stream object of a handle, for launches made through Python (kept: at most 64 handles).
static PyObject* stream_object(FastLaunch* self, PyObject* handle) {
    PyObject* hs = PyDict_GetItemWithError(self->streams, handle);
    if (hs) {
        Py_INCREF(hs);
        return hs;
    }
    if (PyErr_Occurred()) return NULL;
    if (PyDict_GET_SIZE(self->streams) > 64) PyDict_Clear(self->streams);
    hs = PyObject_CallOneArg(self->cu_stream, handle);
    if (hs && PyDict_SetItem(self->streams, handle, hs) < 0) Py_CLEAR(hs);
    return hs;
}

static int launch_step(FastLaunch* self, int j, void** params, uint64_t handle, PyObject* handle_obj) {
    Step* st = &self->steps[j];
    int err;
    PyObject* address = NULL;
    if (self->cu_launch && !(st->dependent && j)) {
        err = self->cu_launch(st->handle, st->grid, 1, 1, st->block, 1, 1, 0, (void*)(uintptr_t)handle, params, NULL);
    } else {
        PyObject* hs = stream_object(self, handle_obj);
        if (!hs) return -1;
        address = PyLong_FromVoidPtr(params);
        PyObject *r = NULL, *grid = PyLong_FromUnsignedLong(st->grid), *block = PyLong_FromUnsignedLong(st->block);
        if (address && grid && block) {
            if (st->dependent && j)
                r = PyObject_CallFunctionObjArgs(self->launch_dependent, st->fn, grid, block, hs, address, NULL);
            else
                r = PyObject_CallFunction(self->py_launch, "OOiiOiiiOOi", st->fn, grid, 1, 1, block, 1, 1, 0, hs,
                                          address, 0);
        }
        Py_DECREF(hs);
        Py_XDECREF(grid);
        Py_XDECREF(block);
        if (!r) {
            Py_XDECREF(address);
            return -1;
        }
        PyObject* first = PySequence_GetItem(r, 0);
        Py_DECREF(r);
        if (!first) {
            Py_XDECREF(address);
            return -1;
        }
        err = PyObject_IsTrue(first);
        Py_DECREF(first);
        if (err < 0) {
            Py_XDECREF(address);
            return -1;
        }
    }
    if (err) {  // nothing was queued: the general launcher retries on a lost context or raises
        if (!address) address = PyLong_FromVoidPtr(params);
        PyObject* r = address ? PyObject_CallFunction(self->relaunch, "OIIOOOO", st->fn, st->grid, st->block, address,
                                                      handle_obj, self->device, st->what)
                              : NULL;
        Py_XDECREF(address);
        if (!r) return -1;
        Py_DECREF(r);
        return 0;
    }
    Py_XDECREF(address);
    return 0;
}

// One call: stream, parameters, outputs, workspace, launches, result (kspec/kernels/callpath/_launch_code.py's order).
static PyObject* run_launch(FastLaunch* self, PyObject* args, PyObject* stream, const uint64_t* ptrs) {
    if (!self->steps) return cleared("launch");
    PyObject *handle_obj = NULL, *result = NULL, *ws = NULL;
    uint64_t handle = 0;
    int from_cupy = stream == Py_None ? cupy_stream(self->stream_of, self->cupy_device, &handle) : 0;
    if (from_cupy < 0) return NULL;
    if (from_cupy) {
        handle_obj = PyLong_FromUnsignedLongLong(handle);
    } else if (stream == Py_None) {
        handle_obj = PyObject_CallOneArg(self->stream_of, self->device);
        if (handle_obj && self->stream_attr != Py_None) {
            PyObject* h = PyObject_GetAttr(handle_obj, self->stream_attr);
            Py_SETREF(handle_obj, h);
        }
    } else {
        handle_obj = PyObject_CallOneArg(self->choose_stream, stream);
    }
    if (!handle_obj) return NULL;
    if (!from_cupy) handle = PyLong_AsUnsignedLongLong(handle_obj);
    if (handle == (uint64_t)-1 && PyErr_Occurred()) {
        Py_DECREF(handle_obj);
        return NULL;
    }
    alignas(16) char local[SCRATCH];
    char* scratch = self->scratch <= SCRATCH ? local : (char*)PyMem_Malloc(self->scratch);
    PyObject* small_outs[SMALL];
    uint64_t small_optr[SMALL];
    PyObject** outs = self->nouts <= SMALL ? small_outs : (PyObject**)PyMem_Calloc(self->nouts, sizeof(PyObject*));
    uint64_t* optr = self->nouts <= SMALL ? small_optr : (uint64_t*)PyMem_Calloc(self->nouts, sizeof(uint64_t));
    int k = 0;
    uint64_t ws_ptr = 0;
    if (!scratch || !outs || !optr) {
        PyErr_NoMemory();
        goto done;
    }
    for (int j = 0; j < self->nsteps; ++j) {
        Step* st = &self->steps[j];
        char* buf = scratch + st->at;
        void** params = (void**)(scratch + st->params_at);
        std::memcpy(buf, st->statics, st->size);
        for (Py_ssize_t s = 0; s < st->nslots; ++s) params[s] = buf + st->slots[s];
        for (Py_ssize_t s = 0; s < st->nptrs; ++s)
            if (st->ptrs[s].source >= 0) std::memcpy(buf + st->ptrs[s].offset, &ptrs[st->ptrs[s].source], 8);
        for (Py_ssize_t s = 0; s < st->nscalars; ++s) {
            const ScalarWrite* w = &st->scalars[s];
            if (pack_scalar(buf + w->offset, st->size - w->offset, w, PyTuple_GET_ITEM(args, w->position)) < 0)
                goto done;
        }
    }
    for (; k < self->nouts; ++k) {
        Output* o = &self->outs[k];
        PyObject* made;
        if (stream == Py_None && o->quick != Py_None && o->like >= 0)
            made = PyObject_CallOneArg(self->empty_like, PyTuple_GET_ITEM(args, o->like));
        else if (stream == Py_None && o->quick != Py_None)
            made = PyObject_CallNoArgs(o->quick);
        else
            made = PyObject_CallFunctionObjArgs(self->allocate, self->library, self->shape, o->dtype,
                                                stream == Py_None ? handle_obj : stream, self->device, NULL);
        if (!made) goto done;
        outs[k] = made;
        if (read_pointer(made, o->pointer, self->pointer_of, &optr[k]) < 0) {
            ++k;
            goto done;
        }
    }
    if (self->workspace) {
        PyObject* size = PyLong_FromSsize_t(self->workspace);
        ws = size ? PyObject_CallFunctionObjArgs(self->allocate_bytes, size, self->device, handle_obj, stream, NULL)
                  : NULL;
        Py_XDECREF(size);
        if (!ws) goto done;
        PyObject* p = PyObject_GetAttr(ws, S_ptr);
        if (!p) goto done;
        ws_ptr = PyLong_AsUnsignedLongLong(p);
        Py_DECREF(p);
        if (ws_ptr == (uint64_t)-1 && PyErr_Occurred()) goto done;
    }
    for (int j = 0; j < self->nsteps; ++j) {  // the outputs' and workspace's pointers
        Step* st = &self->steps[j];
        char* buf = scratch + st->at;
        for (Py_ssize_t s = 0; s < st->nptrs; ++s) {
            int source = st->ptrs[s].source;
            if (source >= 0) continue;
            uint64_t value = source == WORKSPACE_SOURCE ? ws_ptr : optr[-1 - source];
            std::memcpy(buf + st->ptrs[s].offset, &value, 8);
        }
    }
    if (self->nsteps && self->activate != Py_None) {
        PyObject* r = PyObject_CallOneArg(self->activate, self->device);
        if (!r) goto done;
        Py_DECREF(r);
    }
    for (int j = 0; j < self->nsteps; ++j)
        if (launch_step(self, j, (void**)(scratch + self->steps[j].params_at), handle, handle_obj) < 0) goto done;
    if (self->form == 0) {
        result = Py_NewRef(Py_None);
    } else {
        PyObject* tuple = self->form == 2 ? PyTuple_New(self->nitems) : NULL;
        if (self->form == 2 && !tuple) goto done;
        for (int i = 0; i < self->nitems; ++i) {
            int item = self->items[i];
            PyObject* v = item >= 0 ? PyTuple_GET_ITEM(args, item) : outs[-1 - item];
            Py_INCREF(v);
            if (tuple)
                PyTuple_SET_ITEM(tuple, i, v);
            else
                result = v;
        }
        if (tuple) result = tuple;
    }
done:
    Py_XDECREF(ws);  // freed in stream order, after the launches that use it
    for (int i = 0; i < k; ++i) Py_DECREF(outs[i]);
    if (scratch && scratch != local) PyMem_Free(scratch);
    if (outs && outs != small_outs) PyMem_Free(outs);
    if (optr && optr != small_optr) PyMem_Free(optr);
    Py_DECREF(handle_obj);
    return result;
}

// launch(args, stream, p0, ..., pN): what the generated Python launch takes.
static PyObject* FastLaunch_vectorcall(PyObject* op, PyObject* const* argv, size_t nargsf, PyObject* kwnames) {
    FastLaunch* self = (FastLaunch*)op;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if (kwnames && PyTuple_GET_SIZE(kwnames)) {
        PyErr_SetString(PyExc_TypeError, "a prepared launch takes no keyword arguments");
        return NULL;
    }
    if (n != 2 + self->nargs || !PyTuple_Check(argv[0]) || PyTuple_GET_SIZE(argv[0]) != self->nargs) {
        PyErr_Format(PyExc_TypeError, "a prepared launch takes (args, stream) and %d pointers", self->nargs);
        return NULL;
    }
    uint64_t small[SMALL] = {0};  // (zeroed: a kernel without arguments reads none of it)
    uint64_t* ptrs = self->nargs <= SMALL ? small : (uint64_t*)PyMem_Calloc(self->nargs, sizeof(uint64_t));
    if (!ptrs) return PyErr_NoMemory();
    for (int i = 0; i < self->nargs; ++i) {
        ptrs[i] = PyLong_AsUnsignedLongLong(argv[2 + i]);
        if (ptrs[i] == (uint64_t)-1 && PyErr_Occurred()) {
            if (ptrs != small) PyMem_Free(ptrs);
            return NULL;
        }
    }
    PyObject* r = run_launch(self, argv[0], argv[1], ptrs);
    if (ptrs != small) PyMem_Free(ptrs);
    return r;
}

static void free_steps(FastLaunch* self) {
    if (self->steps) {
        for (int j = 0; j < self->nsteps; ++j) {
            PyMem_Free(self->steps[j].slots);
            PyMem_Free(self->steps[j].ptrs);
            PyMem_Free(self->steps[j].scalars);
        }
        PyMem_Free(self->steps);
    }
    PyMem_Free(self->outs);
    PyMem_Free(self->items);
    self->steps = NULL;
    self->outs = NULL;
    self->items = NULL;
}

static int FastLaunch_traverse(PyObject* op, visitproc visit, void* arg) {
    FastLaunch* self = (FastLaunch*)op;
    Py_VISIT(self->keep);
    Py_VISIT(self->streams);
    Py_VISIT(Py_TYPE(op));
    return 0;
}

static int FastLaunch_clear(PyObject* op) {
    FastLaunch* self = (FastLaunch*)op;
    free_steps(self);  // its borrowed pointers go with `keep`
    Py_CLEAR(self->keep);
    Py_CLEAR(self->streams);
    return 0;
}

static PyMemberDef FastLaunch_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(FastLaunch, vectorcall), READONLY, NULL},
    {"description", T_OBJECT, offsetof(FastLaunch, keep), READONLY, "(steps, outputs, result, consts) as given"},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot FastLaunch_slots[] = {
    {Py_tp_call, (void*)PyVectorcall_Call},
    {Py_tp_traverse, (void*)FastLaunch_traverse},
    {Py_tp_clear, (void*)FastLaunch_clear},
    {Py_tp_dealloc, (void*)gc_dealloc},
    {Py_tp_members, (void*)FastLaunch_members},
    {Py_tp_doc, (void*)"A prepared call's launch in C: launch(args, stream, p0, ..., pN)."},
    {0, NULL},
};

static PyType_Spec FastLaunch_spec = {
    "kspec_fastcall.FastLaunch", sizeof(FastLaunch), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL, FastLaunch_slots,
};
