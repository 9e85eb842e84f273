// CuPy's arrays read as CuPy's own Cython code reads them (kspec/runtime/_cupy_layout.py decides whether to).
//
// A CuPy array's `shape` and `strides` are properties that build a list and then a tuple from a C++ vector on
// every read, and `data.ptr` makes a MemoryPointer read and an int: together most of a call's key reads. Cython
// modules that `cimport cupy` read the fields of `_ndarray_base` and `MemoryPointer` directly, at the offsets
// their .pxd files declare (cupy/_core/core.pxd, cupy/cuda/memory.pxd; Cython checks `tp_basicsize` at import).
// These are those declarations as Cython lays them out, used in stages (cupy_stage): `cupy_layout` registers
// the types where both `tp_basicsize` equal these structs' sizes; the probe (kspec/runtime/_cupy_layout.py)
// compares every plain field (`cupy_fields`, which follows no pointer) with its attribute on probe arrays and
// then lets itself follow pointers (`cupy_confirm(PROBING)`: `cupy_reads`, `cupy_stream_handle`); only when
// every read equals its attribute do calls read through the layout (`cupy_confirm(ON)`). Anything else keeps
// the attribute reads.
//
// The current stream comes from cupy_backends' C API (`get_stream_ptr(device_id)` in its `__pyx_capi__`), the
// one CuPy's kernels launch on: `cupy.cuda.get_current_stream(device_id).ptr` without its Stream object.

struct CupyMemoryPointer {  // cupy.cuda.memory.MemoryPointer
    PyObject_HEAD
    void* vtab;
    intptr_t ptr;
    int device_id;
    PyObject* mem;
};

struct CupyArray {  // cupy._core.core._ndarray_base
    PyObject_HEAD
    void* vtab;
    PyObject* weakref;
    Py_ssize_t size;
    std::vector<Py_ssize_t> shape, strides;
    int c_contiguous, f_contiguous, index_32_bits;  // Cython's bint
    PyObject* dtype;
    CupyMemoryPointer* data;
    PyObject* base;
};

typedef intptr_t (*stream_ptr_t)(int);
static const char STREAM_PTR_SIGNATURE[] = "intptr_t (int)";

static PyTypeObject *cupy_array_type = NULL, *cupy_pointer_type = NULL;
static PyObject* cupy_current_stream = NULL;  // cupy.cuda.get_current_stream, which stream_ptr stands in for
static stream_ptr_t cupy_stream_ptr = NULL;
enum CupyStage { CUPY_OFF = 0, CUPY_REGISTERED = 1, CUPY_PROBING = 2, CUPY_ON = 3 };
static int cupy_stage = CUPY_OFF;

// cupy_layout(array_base, memory_pointer, get_current_stream, get_stream_ptr capsule) -> bool, or
// cupy_layout(None, None, None, None): forget it. True where both types have the sizes declared above and the
// capsule has the signature expected: the types are then registered, nothing read through them yet.
static PyObject* cupy_layout(PyObject* module, PyObject* args) {
    PyObject *array_base, *pointer, *current, *capsule;
    if (!PyArg_ParseTuple(args, "OOOO", &array_base, &pointer, &current, &capsule)) return NULL;
    Py_CLEAR(cupy_array_type);
    Py_CLEAR(cupy_pointer_type);
    Py_CLEAR(cupy_current_stream);
    cupy_stream_ptr = NULL;
    cupy_stage = CUPY_OFF;
    if (array_base == Py_None) Py_RETURN_FALSE;
    if (!PyType_Check(array_base) || !PyType_Check(pointer) || !PyCapsule_CheckExact(capsule)) {
        PyErr_SetString(PyExc_TypeError, "cupy_layout(array type, pointer type, get_current_stream, capsule)");
        return NULL;
    }
    PyTypeObject *a = (PyTypeObject*)array_base, *p = (PyTypeObject*)pointer;
    const char* name = PyCapsule_GetName(capsule);
    if (a->tp_basicsize != (Py_ssize_t)sizeof(CupyArray) || p->tp_basicsize != (Py_ssize_t)sizeof(CupyMemoryPointer) ||
        !name || std::strcmp(name, STREAM_PTR_SIGNATURE) != 0)
        Py_RETURN_FALSE;
    void* fn = PyCapsule_GetPointer(capsule, name);
    if (!fn) return NULL;
    cupy_array_type = (PyTypeObject*)Py_NewRef(array_base);
    cupy_pointer_type = (PyTypeObject*)Py_NewRef(pointer);
    cupy_current_stream = Py_NewRef(current);
    cupy_stream_ptr = (stream_ptr_t)fn;
    cupy_stage = CUPY_REGISTERED;
    Py_RETURN_TRUE;
}

// cupy_fields(a) -> (size, dtype, data, base addresses, c_contiguous, f_contiguous) read from a registered
// type's instance, following no pointer (what the probe compares first), or None.
static PyObject* cupy_fields(PyObject* module, PyObject* a) {
    if (cupy_stage < CUPY_REGISTERED || !PyObject_TypeCheck(a, cupy_array_type)) Py_RETURN_NONE;
    CupyArray* x = (CupyArray*)a;
    return Py_BuildValue("(nKKKii)", x->size, (unsigned long long)(uintptr_t)x->dtype,
                         (unsigned long long)(uintptr_t)x->data, (unsigned long long)(uintptr_t)x->base,
                         x->c_contiguous, x->f_contiguous);
}

// cupy_confirm(stage): PROBING (2), the fields matched: the probe's reads may follow pointers; ON (3), every
// read matched: calls read through the layout.
static PyObject* cupy_confirm(PyObject* module, PyObject* stage) {
    long s = PyLong_AsLong(stage);
    if (s == -1 && PyErr_Occurred()) return NULL;
    if (cupy_stage < CUPY_REGISTERED || (s != CUPY_PROBING && s != CUPY_ON)) {
        PyErr_SetString(PyExc_RuntimeError, "cupy_confirm: no layout registered, or a stage other than 2 or 3");
        return NULL;
    }
    cupy_stage = (int)s;
    Py_RETURN_NONE;
}

// The array's data pointer object, where the layout has reached `stage` and `a` is one of its arrays with a
// MemoryPointer.
static CupyMemoryPointer* cupy_pointer_of(PyObject* a, int stage = CUPY_ON) {
    if (cupy_stage < stage || !PyObject_TypeCheck(a, cupy_array_type)) return NULL;
    CupyMemoryPointer* m = ((CupyArray*)a)->data;
    return m && PyObject_TypeCheck((PyObject*)m, cupy_pointer_type) ? m : NULL;
}

// A CuPy array's `data.ptr` where the layout serves it: 1 read, 0 not served.
static int cupy_data_ptr(PyObject* a, uint64_t* ptr) {
    CupyMemoryPointer* m = cupy_pointer_of(a);
    if (m) *ptr = (uint64_t)m->ptr;
    return m != NULL;
}

// Whether a CuPy array type reads its key through the layout: a subclass that redefines one of the attributes
// keeps the attribute reads.
static int reads_layout(PyTypeObject* tp) {
    if (cupy_stage < CUPY_ON || !PyType_IsSubtype(tp, cupy_array_type)) return 0;
    PyObject* names[] = {S_shape, S_strides, S_dtype, S_data};
    int same = 1;
    for (PyObject* name : names) {
        PyObject* mine = PyObject_GetAttr((PyObject*)tp, name);
        PyObject* base = PyObject_GetAttr((PyObject*)cupy_array_type, name);
        same = same && mine && base && mine == base;
        Py_XDECREF(mine);
        Py_XDECREF(base);
    }
    if (PyErr_Occurred()) PyErr_Clear();  // an attribute a type lacks: the attribute reads tell
    return same;
}

static PyObject* tuple_of(const std::vector<Py_ssize_t>& v) {
    PyObject* t = PyTuple_New((Py_ssize_t)v.size());
    if (!t) return NULL;
    for (size_t i = 0; i < v.size(); ++i) {
        PyObject* x = PyLong_FromSsize_t(v[i]);
        if (!x) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, (Py_ssize_t)i, x);
    }
    return t;
}

// A CuPy array's key items (shape, strides, dtype[, device id]) into items[] and its pointer; 1, 0 where the
// layout does not serve it (the attributes do), -1 on an error.
static int cupy_read(PyObject* a, PyObject** items, int device, uint64_t* ptr, int stage = CUPY_ON) {
    CupyMemoryPointer* m = cupy_pointer_of(a, stage);
    if (!m) return 0;
    CupyArray* x = (CupyArray*)a;
    items[0] = tuple_of(x->shape);
    items[1] = tuple_of(x->strides);
    items[2] = Py_NewRef(x->dtype);
    if (device) items[3] = PyLong_FromLong(m->device_id);
    *ptr = (uint64_t)m->ptr;
    return items[0] && items[1] && (!device || items[3]) ? 1 : -1;
}

// cupy_reads(a) -> (shape, strides, dtype, device_id, ptr) as the layout reads them, or None: what the probe compares.
static PyObject* cupy_reads(PyObject* module, PyObject* a) {
    PyObject* items[4] = {NULL, NULL, NULL, NULL};
    uint64_t ptr = 0;
    int r = cupy_read(a, items, 1, &ptr, CUPY_PROBING);
    if (r == 0) Py_RETURN_NONE;
    PyObject* out = r > 0 ? Py_BuildValue("(OOOOK)", items[0], items[1], items[2], items[3], (unsigned long long)ptr)
                          : NULL;
    for (auto* item : items) Py_XDECREF(item);
    return out;
}

// `stream_of(device).ptr` where stream_of is CuPy's get_current_stream, through cupy_backends' C API: 1 read,
// 0 where the layout is off or stream_of is another function (the caller calls it), -1 where CuPy raised.
static int cupy_stream(PyObject* stream_of, int device, uint64_t* handle, int stage = CUPY_ON) {
    if (cupy_stage < stage || stream_of != cupy_current_stream || device < 0) return 0;
    intptr_t p = cupy_stream_ptr(device);
    if (p == -1 && PyErr_Occurred()) return -1;
    *handle = (uint64_t)p;
    return 1;
}

// cupy_stream_handle(device_id) -> int or None: what the launch reads (the probe compares it).
static PyObject* cupy_stream_handle(PyObject* module, PyObject* device) {
    long d = PyLong_AsLong(device);
    if (d == -1 && PyErr_Occurred()) return NULL;
    uint64_t handle;
    int r = cupy_stream(cupy_current_stream, (int)d, &handle, CUPY_PROBING);
    if (r < 0) return NULL;
    if (r == 0) Py_RETURN_NONE;
    return PyLong_FromUnsignedLongLong(handle);
}
