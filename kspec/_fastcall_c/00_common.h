// kspec's compiled call path (issue [Q]): a spec kernel's dispatcher and prepared launch, a kernel class's
// __call__ and a raw kernel's call, in C. What every file of this directory shares.
//
// The Python path (kspec/kernels/callpath/_signature.py's generated dispatcher, kspec/kernels/callpath/_launch_code.py's generated
// launch, kspec/runtime/_packer.py's raw packers) does the same work and stays the fallback: where this module
// cannot be built, under KSPEC_CALL_PATH=python, and for what a description does not cover. Both take the same
// descriptions, made by the kernels layer; nothing here decides what a description does not say.
//
// The files are one translation unit, concatenated in name order (kspec/compiler/host/_extension.py) and built by
// kspec's host compiler as a CPython extension module (kspec/runtime/_fastcall.py loads it). Every Python object
// an instance reads is owned by its `keep` tuple; the C structs hold borrowed pointers into it.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

typedef int (*cu_launch_t)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*,
                           void**, void**);

static PyObject *S_cai, *S_mask, *S_version, *S_typestr, *S_stream_key, *S_shape, *S_strides, *S_dtype, *S_data, *S_ptr, *S_stride, *S_get_device, *S_data_ptr,
    *S_kshape, *S_kstrides, *S_kdtype, *S_kptr, *S_kdevice, *S_device_id, *S_flags, *S_writeable, *S_ctypes,
    *S_launch, *S_stream, *S_extra, *S_requires_grad, *S_torch, *S_is_grad_enabled;

// Every type here keeps its objects GC-visible and frees what it owns in its tp_clear, so one dealloc serves
// them all; a cleared instance refuses calls (each call checks what its clear empties).
static void gc_dealloc(PyObject* op) {
    PyTypeObject* tp = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    tp->tp_clear(op);
    PyObject_GC_Del(op);
    Py_DECREF(tp);
}

// tp_descr_get of a type that stands in for a class's __call__: bound to the instance it is read from.
static PyObject* bind_method(PyObject* self, PyObject* obj, PyObject* type) {
    if (!obj || obj == Py_None) return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static PyObject* cleared(const char* what) {
    PyErr_Format(PyExc_RuntimeError, "kspec fastcall: a cleared %s was called", what);
    return NULL;
}

static const int WORKSPACE_SOURCE = INT_MIN;  // a pointer write taking the workspace's address
enum { SCRATCH = 8192, SMALL = 32 };
