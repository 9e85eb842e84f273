// kspec's compiled call path (issue [Q]): a spec kernel's dispatcher and prepared launch, in C.
//
// The Python path (kspec/kernels/_arguments.py's generated dispatcher, kspec/kernels/_launch_code.py's generated
// launch) does the same work and stays the fallback: where this library cannot be built, under
// KSPEC_FASTCALL=0, and for calls whose outputs go back as another framework's arrays. Both take the same
// descriptions, made by the kernels layer; this file decides nothing a description does not say.
//
// Built by kspec's host compiler (kspec/runtime/_fastcall.py) as a CPython extension module. Every Python
// object an instance reads is owned by its `keep` tuple; the C structs hold borrowed pointers into it.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>

typedef int (*cu_launch_t)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*,
                           void**, void**);

static PyObject *S_cai, *S_mask, *S_version, *S_typestr, *S_stream_key, *S_shape, *S_strides, *S_dtype, *S_data, *S_ptr, *S_stride, *S_get_device, *S_data_ptr,
    *S_kshape, *S_kstrides, *S_kdtype, *S_kptr, *S_kdevice, *S_device_id, *S_flags, *S_writeable, *S_ctypes,
    *S_launch, *S_stream, *S_extra;

static const int WORKSPACE_SOURCE = INT_MIN;  // a pointer write taking the workspace's address
enum { SCRATCH = 8192, SMALL = 32 };

// ---------------------------------------------------------------------------------------------------------
// The prepared launch

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

// fast_launch(steps, outputs, result, consts): see kspec/kernels/_launch_native.py, which makes the description.
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

// One call: stream, parameters, outputs, workspace, launches, result (kspec/kernels/_launch_code.py's order).
static PyObject* run_launch(FastLaunch* self, PyObject* args, PyObject* stream, const uint64_t* ptrs) {
    if (!self->steps) {
        PyErr_SetString(PyExc_RuntimeError, "kspec fastcall: a cleared launch was called");
        return NULL;
    }
    PyObject *handle_obj, *result = NULL, *ws = NULL;
    if (stream == Py_None) {
        handle_obj = PyObject_CallOneArg(self->stream_of, self->device);
        if (handle_obj && self->stream_attr != Py_None) {
            PyObject* h = PyObject_GetAttr(handle_obj, self->stream_attr);
            Py_SETREF(handle_obj, h);
        }
    } else {
        handle_obj = PyObject_CallOneArg(self->choose_stream, stream);
    }
    if (!handle_obj) return NULL;
    uint64_t handle = PyLong_AsUnsignedLongLong(handle_obj);
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
    uint64_t small[SMALL];
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

static void FastLaunch_dealloc(PyObject* op) {
    PyTypeObject* tp = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    FastLaunch_clear(op);
    PyObject_GC_Del(op);
    Py_DECREF(tp);
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
    {Py_tp_dealloc, (void*)FastLaunch_dealloc},
    {Py_tp_members, (void*)FastLaunch_members},
    {Py_tp_doc, (void*)"A prepared call's launch in C: launch(args, stream, p0, ..., pN)."},
    {0, NULL},
};

static PyType_Spec FastLaunch_spec = {
    "kspec_fastcall.FastLaunch", sizeof(FastLaunch), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL, FastLaunch_slots,
};

// ---------------------------------------------------------------------------------------------------------
// The dispatcher of one argument-type tuple

enum Kind { SCALAR = 0, CUPY = 1, TORCH = 2, KSPEC = 3, HOST = 4, CUPY_SEVERAL = 5, KSPEC_SEVERAL = 6, CAI = 7 };
static const int KEY_ITEMS[] = {0, 3, 4, 3, 4, 4, 4, 1};

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
        self->kinds[i] = (int)kind;
        self->nkey += KEY_ITEMS[kind];
    }
    return (PyObject*)self;
}

// An array known only by its __cuda_array_interface__ (kspec/kernels/_arguments.py's cai_entry, in C): its
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

// Append an argument's key items to `key` from `*at` and read its pointer (the reads of
// kspec/kernels/_arguments.py's READS). 1: a key; 0: the call cannot be keyed (MISS); -1: an error.
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
        case TORCH:
            items[0] = PyObject_GetAttr(a, S_shape);
            items[1] = PyObject_CallMethodNoArgs(a, S_stride);
            items[2] = PyObject_GetAttr(a, S_dtype);
            items[3] = PyObject_CallMethodNoArgs(a, S_get_device);
            p = PyObject_CallMethodNoArgs(a, S_data_ptr);
            break;
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
    if (!self->keep) {
        PyErr_SetString(PyExc_RuntimeError, "kspec fastcall: a cleared dispatcher was called");
        return NULL;
    }
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
    self->n = -1;  // a cleared dispatcher misses every call (its borrowed pointers went with `keep`)
    Py_CLEAR(self->keep);
    return 0;
}

static void Dispatch_dealloc(PyObject* op) {
    PyTypeObject* tp = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    Dispatch_clear(op);
    PyMem_Free(((Dispatch*)op)->kinds);
    PyObject_GC_Del(op);
    Py_DECREF(tp);
}

static PyMemberDef Dispatch_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Dispatch, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot Dispatch_slots[] = {
    {Py_tp_call, (void*)PyVectorcall_Call},
    {Py_tp_traverse, (void*)Dispatch_traverse},
    {Py_tp_clear, (void*)Dispatch_clear},
    {Py_tp_dealloc, (void*)Dispatch_dealloc},
    {Py_tp_members, (void*)Dispatch_members},
    {Py_tp_doc, (void*)"One argument-type tuple's dispatcher in C: dispatch(args, stream=None, extra=None)."},
    {0, NULL},
};

static PyType_Spec Dispatch_spec = {
    "kspec_fastcall.Dispatch", sizeof(Dispatch), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL, Dispatch_slots,
};

// ---------------------------------------------------------------------------------------------------------
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

static PyObject* KernelCall_get(PyObject* self, PyObject* obj, PyObject* type) {
    if (!obj || obj == Py_None) return Py_NewRef(self);
    return PyMethod_New(self, obj);
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

static void KernelCall_dealloc(PyObject* op) {
    PyTypeObject* tp = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    KernelCall_clear(op);
    PyObject_GC_Del(op);
    Py_DECREF(tp);
}

static PyMemberDef KernelCall_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(KernelCall, vectorcall), READONLY, NULL},
    {"__wrapped__", T_OBJECT, offsetof(KernelCall, slow), READONLY, "the Python __call__ it stands in for"},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot KernelCall_slots[] = {
    {Py_tp_call, (void*)PyVectorcall_Call},
    {Py_tp_descr_get, (void*)KernelCall_get},
    {Py_tp_traverse, (void*)KernelCall_traverse},
    {Py_tp_clear, (void*)KernelCall_clear},
    {Py_tp_dealloc, (void*)KernelCall_dealloc},
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

// ---------------------------------------------------------------------------------------------------------
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

// ---------------------------------------------------------------------------------------------------------
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
    if (n != 4 || !self->keep) goto python;  // the general launch says what is wrong
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
        if (stream != Py_None) {
            handle_obj = PyObject_CallOneArg(self->stream_handle, stream);
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
        uint64_t handle = PyLong_AsUnsignedLongLong(handle_obj);
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

static PyObject* RawCall_get(PyObject* self, PyObject* obj, PyObject* type) {
    if (!obj || obj == Py_None) return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static int RawCall_traverse(PyObject* op, visitproc visit, void* arg) {
    Py_VISIT(((RawCall*)op)->keep);
    Py_VISIT(Py_TYPE(op));
    return 0;
}

static int RawCall_clear(PyObject* op) {
    Py_CLEAR(((RawCall*)op)->keep);
    return 0;
}

static void RawCall_dealloc(PyObject* op) {
    PyTypeObject* tp = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    RawCall_clear(op);
    PyMem_Free(((RawCall*)op)->kinds);
    PyMem_Free(((RawCall*)op)->formats);
    PyObject_GC_Del(op);
    Py_DECREF(tp);
}

static PyMemberDef RawCall_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(RawCall, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot RawCall_slots[] = {
    {Py_tp_call, (void*)PyVectorcall_Call},
    {Py_tp_descr_get, (void*)RawCall_get},
    {Py_tp_traverse, (void*)RawCall_traverse},
    {Py_tp_clear, (void*)RawCall_clear},
    {Py_tp_dealloc, (void*)RawCall_dealloc},
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

// ---------------------------------------------------------------------------------------------------------

static PyMethodDef methods[] = {
    {"raw_call", make_raw_call, METH_VARARGS, "raw_call(...) -> RawCall (a raw kernel class's __call__)"},
    {"kernel_call", make_kernel_call, METH_VARARGS, "kernel_call(slow, miss) -> KernelCall (a class's __call__)"},
    {"set_raw_launch", set_raw_launch, METH_O, "set_raw_launch(address): the driver's cuLaunchKernel"},
    {"launch_kernel", (PyCFunction)(void (*)(void))launch_kernel, METH_FASTCALL,
     "launch_kernel(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra) with ints -> (CUresult,)"},
    {"fast_launch", make_fast_launch, METH_VARARGS, "fast_launch(steps, outputs, result, consts) -> FastLaunch"},
    {"dispatcher", make_dispatch, METH_VARARGS,
     "dispatcher(types, kinds, table, entered, current_stream, host_ok, host_kind, miss) -> Dispatch"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "kspec_fastcall", NULL, -1, methods};

PyMODINIT_FUNC PyInit_kspec_fastcall(void) {
    struct {
        PyObject** slot;
        const char* text;
    } names[] = {
        {&S_shape, "shape"},        {&S_strides, "strides"},   {&S_dtype, "dtype"},       {&S_data, "data"},
        {&S_ptr, "ptr"},            {&S_stride, "stride"},     {&S_get_device, "get_device"},
        {&S_data_ptr, "data_ptr"},  {&S_kshape, "_shape"},     {&S_kstrides, "_strides"}, {&S_kdtype, "_dtype"},
        {&S_kptr, "_ptr"},          {&S_kdevice, "_device_id"}, {&S_device_id, "device_id"},
        {&S_flags, "flags"},        {&S_writeable, "writeable"}, {&S_ctypes, "ctypes"},  {&S_launch, "launch"},
        {&S_stream, "stream"},      {&S_extra, "extra"},       {&S_cai, "__cuda_array_interface__"},
        {&S_is_cuda, "is_cuda"},    {&S_host_active, "host_active"}, {&S_shared_mem, "shared_mem"},
        {&S_calls, "_calls"},       {&S_call, "call"},         {&S_miss, "miss"},
        {&S_mask, "mask"},          {&S_version, "version"},   {&S_typestr, "typestr"},  {&S_stream_key, "stream"},
    };
    for (auto& n : names)
        if (!(*n.slot = PyUnicode_InternFromString(n.text))) return NULL;
    if (!(ZERO = PyLong_FromLong(0))) return NULL;
    FastLaunchType = (PyTypeObject*)PyType_FromSpec(&FastLaunch_spec);
    DispatchType = (PyTypeObject*)PyType_FromSpec(&Dispatch_spec);
    KernelCallType = (PyTypeObject*)PyType_FromSpec(&KernelCall_spec);
    RawCallType = (PyTypeObject*)PyType_FromSpec(&RawCall_spec);
    if (!FastLaunchType || !DispatchType || !KernelCallType || !RawCallType) return NULL;
    PyObject* m = PyModule_Create(&module_def);
    if (!m) return NULL;
    Py_INCREF(FastLaunchType);
    Py_INCREF(DispatchType);
    Py_INCREF(KernelCallType);
    Py_INCREF(RawCallType);
    if (PyModule_AddObject(m, "FastLaunch", (PyObject*)FastLaunchType) < 0 ||
        PyModule_AddObject(m, "Dispatch", (PyObject*)DispatchType) < 0 ||
        PyModule_AddObject(m, "KernelCall", (PyObject*)KernelCallType) < 0 ||
        PyModule_AddObject(m, "RawCall", (PyObject*)RawCallType) < 0 ||
        PyModule_AddIntConstant(m, "WORKSPACE", -1000000) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
