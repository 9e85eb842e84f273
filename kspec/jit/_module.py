"""The translation unit around a jit kernel: C++ helpers, headers, device functions, reserved names.

:class:`ModuleState` collects what translating a kernel and the device functions it calls found out (types
that need headers, cooperative groups, the device functions' code); :func:`module_source` assembles it.
"""

from __future__ import annotations

from typing import Any

from ._errors import JitTypeError
from ._types import Array, JitType, Scalar, Shared

_RESERVED = frozenset(
    """alignas alignof and asm auto bool break case catch char char16_t char32_t class const constexpr
    const_cast continue decltype default delete do double dynamic_cast else enum explicit export extern false
    float for friend goto if inline int long mutable namespace new noexcept not nullptr operator or private
    protected public register reinterpret_cast return short signed sizeof static static_assert static_cast
    struct switch template this thread_local throw true try typedef typeid typename union unsigned using
    virtual void volatile wchar_t while xor threadIdx blockIdx blockDim gridDim warpSize min max abs dim3
    half float2 int2 main""".split()
)

HELPERS = r"""namespace kspec_jit {
// A strided view of a device array, as jit kernels see their array arguments (strides in bytes).
template <typename T, int N> struct array {
    T* data;
    long long shape[N > 0 ? N : 1];
    long long strides[N > 0 ? N : 1];
    __device__ T& operator[](long long i) const {
#if defined(KSPEC_HOST)
        if (i < 0 || i >= shape[0]) kspec_host::fault_index(i, shape[0]);  // the CPU device checks bounds
#endif
        return *(T*)((const char*)data + i * strides[0]);  // C cast: T may be const
    }
    template <typename... I> __device__ T& operator()(I... index) const {
        static_assert(sizeof...(I) == N, "index with as many subscripts as the array has dimensions");
        const long long at[] = {0LL, static_cast<long long>(index)...};
        const char* p = (const char*)data;
        for (int k = 0; k < N; ++k) {
#if defined(KSPEC_HOST)
            if (at[k + 1] < 0 || at[k + 1] >= shape[k]) kspec_host::fault_index(at[k + 1], shape[k]);
#endif
            p += at[k + 1] * strides[k];
        }
        return *(T*)p;
    }
    __device__ long long size() const {
        long long n = 1;
        for (int k = 0; k < N; ++k) n *= shape[k];
        return n;
    }
};
__device__ inline unsigned int laneid() {
#if defined(KSPEC_HOST)
    return kspec_host::lane_id();  // the CPU device's warps: 32 consecutive linear thread ids
#else
    unsigned int lane;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
    return lane;
#endif
}
// len(range(start, stop, step)) as Python computes it. The distance is taken in unsigned 64-bit arithmetic,
// so it cannot overflow whatever the bounds; a zero step (Python's ValueError) gives no iteration.
template <typename T> __device__ __forceinline__ long long range_length(T start, T stop, T step) {
    typedef unsigned long long U;
    if (step > T(0)) return stop > start ? (long long)(((U)stop - (U)start - 1ULL) / (U)step + 1ULL) : 0LL;
    if (step == T(0)) return 0LL;
    return start > stop ? (long long)(((U)start - (U)stop - 1ULL) / (0ULL - (U)step) + 1ULL) : 0LL;
}
// Integer power by squaring (x ** n for integers; a negative exponent gives 0 unless |x| == 1).
template <typename T> __device__ T ipow(T base, T exp) {
    if (exp < 0) return base == 1 ? T(1) : (base == T(-1) ? ((exp & 1) ? T(-1) : T(1)) : T(0));
    T result = 1;
    while (exp) { if (exp & 1) result *= base; base *= base; exp >>= 1; }
    return result;
}
}  // namespace kspec_jit
"""


class DeviceFunction:
    """One device function for one signature: its C name, and once translated its prototype and definition.

    ``translator`` is the FunctionTranslator at work on it: while its body is being translated (a recursive
    call) the return type known so far is read from there.
    """

    __slots__ = ("name", "translator", "prototype", "definition")

    def __init__(self, name: str, translator: Any) -> None:
        self.name, self.translator = name, translator
        self.prototype = self.definition = ""  # set once the body is translated


class ModuleState:
    """What one translation unit collects: headers, device functions, flags the launch needs."""

    def __init__(self) -> None:
        self.fp16 = False
        self.complex = False
        self.cooperative_groups = False
        self.memcpy_async = False
        self.aligned_size = False  # cuda::aligned_size_t (memcpy_async(..., aligned_size=N))
        self.grid_sync = False
        # (Python function object, argument types) -> its C function. Keyed by the object, not its id: the key
        # keeps a function made by a factory (`g(10)` returning a fresh device function) alive, so its id
        # cannot be reused by the next one made.
        self.device_functions: dict[tuple[Any, tuple[JitType, ...]], DeviceFunction] = {}
        self.used_names: set[str] = set()  # C names of the kernel and the device functions
        self.helpers: list[str] = []  # C++ helpers a builtin needs (the sm_90 atomics), each once

    def note_type(self, t: JitType) -> None:
        scalar = t.dtype if isinstance(t, (Array, Shared)) else t
        if isinstance(scalar, Scalar):
            if scalar.name in ("float16",):
                self.fp16 = True
            elif scalar.name == "bfloat16":
                raise JitTypeError("bfloat16 is not supported by kspec.jit kernels yet; use float16 or float32")
            elif scalar.kind == "c":
                self.complex = True


def c_name(name: str) -> str:
    return f"{name}_" if name in _RESERVED or name.startswith("__") else name


def module_source(kernel_code: str, module: ModuleState, header: str) -> str:
    """The whole translation unit: headers, helpers, device function prototypes (so that any call order and
    recursion compile), their definitions, the kernel."""
    parts = [header]
    if module.fp16:
        parts.append("#define KSPEC_NEED_FP16")
    if module.complex:
        parts.append("#define KSPEC_NEED_COMPLEX")
    if module.fp16 or module.complex:
        parts.append("#include <kspec/types.cuh>")
    if module.cooperative_groups:
        parts.append("#include <cooperative_groups.h>")
    if module.memcpy_async:
        parts.append("#include <cooperative_groups/memcpy_async.h>")
    if module.aligned_size:
        parts.append("#include <cuda/barrier>")  # defines cuda::aligned_size_t in every CCCL (<cuda/memory> is newer than CUDA 13.0)
    parts.append(HELPERS)
    parts.extend(h + "\n" for h in module.helpers)
    functions = list(module.device_functions.values())
    if functions:
        parts.append("\n".join(f.prototype for f in functions) + "\n")
    parts.extend(f.definition + "\n" for f in functions)
    parts.append(kernel_code)
    return "\n".join(parts) + "\n"
