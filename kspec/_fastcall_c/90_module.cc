// The module: its functions and types.


static PyMethodDef methods[] = {
    {"raw_call", make_raw_call, METH_VARARGS, "raw_call(...) -> RawCall (a raw kernel class's __call__)"},
    {"kernel_call", make_kernel_call, METH_VARARGS, "kernel_call(slow, miss) -> KernelCall (a class's __call__)"},
    {"set_raw_launch", set_raw_launch, METH_O, "set_raw_launch(address): the driver's cuLaunchKernel"},
    {"launch_kernel", (PyCFunction)(void (*)(void))launch_kernel, METH_FASTCALL,
     "launch_kernel(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra) with ints -> (CUresult,)"},
    {"fast_launch", make_fast_launch, METH_VARARGS, "fast_launch(steps, outputs, result, consts) -> FastLaunch"},
    {"dispatcher", make_dispatch, METH_VARARGS,
     "dispatcher(types, kinds, table, entered, current_stream, host_ok, host_kind, miss) -> Dispatch"},
    {"cupy_layout", cupy_layout, METH_VARARGS,
     "cupy_layout(array base, MemoryPointer, get_current_stream, get_stream_ptr capsule) -> bool; Nones: off"},
    {"cupy_fields", cupy_fields, METH_O, "cupy_fields(a) -> (size, dtype, data, base addresses, c, f) or None"},
    {"cupy_confirm", cupy_confirm, METH_O, "cupy_confirm(2): the probe may follow pointers; (3): calls read"},
    {"cupy_reads", cupy_reads, METH_O, "cupy_reads(a) -> (shape, strides, dtype, device_id, ptr) or None"},
    {"cupy_stream_handle", cupy_stream_handle, METH_O, "cupy_stream_handle(device_id) -> int or None"},
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
        {&S_requires_grad, "requires_grad"}, {&S_torch, "torch"}, {&S_is_grad_enabled, "is_grad_enabled"},
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
