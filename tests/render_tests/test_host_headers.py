"""kspec's device headers under the CPU device's prelude: every header compiles with every KSPEC_NEED_*
macro, kspec::uf's ufuncs instantiate and compute for every type family, complex<T> (kspec's own, the
same type as on the GPU) with its mixed-precision operators, cuComplex.h on float2, and RawView's host bounds
check. CPU only."""

from __future__ import annotations

import ctypes
import math

import numpy as np
import pytest

from kspec.render import render, specialize

from helpers import render_cases as rc
from helpers.host_build import build, load, requires_host_cxx

pytestmark = requires_host_cxx

NEEDS = "#define KSPEC_NEED_FP16 1\n#define KSPEC_NEED_BF16 1\n#define KSPEC_NEED_COMPLEX 1\n"
HEADERS = ["kspec/types.cuh", "kspec/indexer.cuh", "kspec/array.cuh", "kspec/reduce.cuh", "kspec/ufunc.cuh",
           "kspec/complex.cuh", "kspec/tile.cuh", "cupy/complex.cuh", "cupy/cuComplex_bridge.h", "kspec/std_lite.cuh"]


def includes(headers: list[str]) -> str:
    return "".join(f"#include <{h}>\n" for h in headers)


@pytest.mark.parametrize("needs", [NEEDS, ""], ids=["all-types", "plain"])
def test_every_kspec_header_compiles_on_the_host(needs: str) -> None:
    source = needs + includes(HEADERS) + "\n#include <kspec/cucomplex_compat.cuh>\n"
    build(source, "headers")


def test_each_kspec_header_compiles_alone() -> None:
    for header in [*HEADERS, "kspec/cucomplex_compat.cuh"]:
        # kspec/types.cuh comes first in every rendered kernel: it includes the type headers the others use
        build(NEEDS + includes(["kspec/types.cuh", header]), "headers")


RENDERED = [(rc.AXPY, {"T": "float16"}), (rc.AXPY, {"T": "bfloat16"}), (rc.AXPY, {"T": "complex64"}),
            (rc.L2NORM_HALF, {}), (rc.L2NORM, {"T": "complex128"}), (rc.REVERSE, {"T": "float64"})]


@pytest.mark.parametrize(("spec", "types"), RENDERED, ids=lambda v: getattr(v, "name", None) or "-".join(v.values()))
def test_rendered_device_kernels_compile_on_the_host(spec, types) -> None:
    # kspec's CUDA templates for half, bfloat16 and complex types, syntax only: the host types and headers
    # must accept everything the renderer emits for them.
    module = render(specialize(spec, types))
    build(module.source, "headers")


UFUNCS = NEEDS + r"""
#include <kspec/types.cuh>
#include <kspec/ufunc.cuh>
namespace kspec {
namespace uf {  // inside the namespace, as fuse's kernels call them (a using-directive would meet ::fmax)
EXPORT long long ints(int op) {
  switch (op) {
    case 0: return floor_divide(-7, 2);
    case 1: return remainder(-7, 2);
    case 2: return power((long long)3, (long long)5);
    case 3: return add((signed char)127, (signed char)1);
    case 4: return gcd(-12, 18) * 100 + lcm(4, 6);
    case 5: return right_shift(-8, 40);
    case 6: return bitwise_count(-7);
    case 7: return float_to_int<unsigned char>(-1.0f);
    default: return less(-1LL, 1ULL);
  }
}
EXPORT double floats(int op) {
  switch (op) {
    case 0: return remainder(-7.5, 2.0);
    case 1: return floor_divide(7.0f, -2.0f);
    case 2: return maximum(nan_of(1.0), 1.0);
    case 3: return fmax(nan_of(1.0f), 1.0f);
    case 4: return logaddexp(1.0, 2.0);
    case 5: return spacing(1.0f);
    case 6: return __half2float(add(__float2half(1.0f), __float2half(0.0009765625f)));
    case 7: return __bfloat162float(multiply(__float2bfloat16(3.0f), __float2bfloat16(1.0078125f)));
    case 8: return __half2float(nextafter(__float2half(1.0f), __float2half(2.0f)));
    case 9: return __half2float(spacing(__float2half(-1.0f)));
    case 10: return absolute(complex<float>(3.0f, 4.0f));
    case 11: return divide(complex<double>(1.0, 2.0), complex<double>(3.0, -4.0)).imag();
    case 12: return power(complex<double>(0.0, 1.0), complex<double>(2.0, 0.0)).real();
    case 13: return kspec::uf::sqrt(complex<double>(-4.0, 0.0)).imag();  // qualified, as fuse emits: ADL also finds kspec_cx::sqrt
    default: return less(complex<float>(1, 2), complex<float>(1, 3));
  }
}
}  // namespace uf
}  // namespace kspec
"""


def test_ufuncs_compute_on_the_host() -> None:
    lib = load(UFUNCS)
    lib.ints.restype = ctypes.c_longlong
    lib.floats.restype = ctypes.c_double
    assert [lib.ints(k) for k in range(9)] == [-4, 1, 243, -128, 612, -1, 3, 255, 1]
    f = [lib.floats(k) for k in range(15)]
    assert f[0] == 0.5 and f[1] == -4.0 and math.isnan(f[2]) and f[3] == 1.0
    assert f[4] == np.logaddexp(1.0, 2.0)
    assert f[5] == float(np.spacing(np.float32(1.0)))
    assert f[6] == float(np.float16(1.0) + np.float16(0.0009765625))
    assert f[7] == 3.03125  # 3 * 1.0078125 = 3.0234375 is a bfloat16 tie: to even
    assert f[8] == float(np.nextafter(np.float16(1), np.float16(2)))
    assert f[9] == float(np.spacing(np.float16(-1.0)))
    assert f[10] == 5.0
    assert f[11] == pytest.approx(((1 + 2j) / (3 - 4j)).imag, rel=1e-15)
    assert f[12] == -1.0
    assert f[13] == 2.0
    assert f[14] == 1.0


COMPLEX = r"""
#include <cupy/complex.cuh>
#include <cuComplex.h>
EXPORT void ops(double* out) {
  const complex<float> z(1.5f, -2.0f), w(0.25f, 3.0f);
  const complex<double> d(2.0, 0.5);
  complex<float> a = z * w, b = z / w, c = z * 2, e = 3 - z;       // complex<float> with int: complex<float>
  complex<double> f = z * 0.5, g = z + d, h = d / z, k = 2.0f * d;  // mixing in double promotes
  thrust::complex<double> t = thrust::exp(complex<double>(0.0, 3.141592653589793));
  complex<double> p = polar(2.0, 0.5);
  const complex<double> vals[] = {a, b, c, e, f, g, h, k, t, p, complex<double>(abs(z), arg(z)),
                                  complex<double>(conj(w)), exp(d), sqrt(d), log(d), pow(d, 2.0)};
  for (int i = 0; i < 16; ++i) { out[2 * i] = vals[i].real(); out[2 * i + 1] = vals[i].imag(); }
}
EXPORT void cucomplex(double* out) {
  const cuFloatComplex x = make_cuFloatComplex(3.0f, 4.0f), y = make_cuFloatComplex(1.0f, -2.0f);
  const cuFloatComplex q = cuCdivf(x, y), m = cuCmulf(x, y), s = cuCfmaf(x, y, x);
  const cuDoubleComplex dq = cuCdiv(make_cuDoubleComplex(3, 4), make_cuDoubleComplex(1, -2));
  const double v[] = {cuCrealf(q), cuCimagf(q), cuCrealf(m), cuCimagf(m), cuCabsf(x), cuCrealf(s), cuCimagf(s),
                      cuCreal(dq), cuCimag(dq), cuCabs(make_cuDoubleComplex(1e300, 1e300)), (double)sizeof(cuFloatComplex)};
  for (int i = 0; i < 11; ++i) out[i] = v[i];
}
"""


def test_complex_operators_and_functions() -> None:
    lib = load(COMPLEX)
    out = np.zeros(32)
    lib.ops(ctypes.c_void_p(out.ctypes.data))
    got = [complex(out[2 * i], out[2 * i + 1]) for i in range(16)]
    z, w, d = np.complex64(1.5 - 2j), np.complex64(0.25 + 3j), 2.0 + 0.5j
    want = [z * w, z / w, z * np.float32(2), np.float32(3) - z, complex(z) * 0.5, complex(z) + d, d / complex(z),
            2.0 * d, -1 + 1.2246467991473532e-16j, 2 * complex(math.cos(0.5), math.sin(0.5)),
            complex(abs(complex(z)), math.atan2(-2, 1.5)), complex(w).conjugate(), np.exp(d), np.sqrt(d), np.log(d), d ** 2]
    for i, (g, e) in enumerate(zip(got, want)):
        tol = 1e-6 if i < 4 or i == 10 else 1e-14
        assert abs(g - complex(e)) <= tol * max(1.0, abs(complex(e))), (i, g, e)


def test_cucomplex_header_works_on_float2() -> None:
    lib = load(COMPLEX)
    out = np.zeros(11)
    lib.cucomplex(ctypes.c_void_p(out.ctypes.data))
    x, y = 3 + 4j, 1 - 2j
    q, m = x / y, x * y
    assert out[0:4] == pytest.approx([q.real, q.imag, m.real, m.imag], rel=1e-6)
    assert out[4] == 5.0
    assert out[5:7] == pytest.approx([(x * y + x).real, (x * y + x).imag], rel=1e-6)
    assert out[7:9] == pytest.approx([q.real, q.imag], rel=1e-15)
    assert out[9] == pytest.approx(math.sqrt(2) * 1e300, rel=1e-15)  # no overflow in the intermediate square
    assert out[10] == 8


RAWVIEW = r"""
#include <kspec/array.cuh>
EXPORT int read(float* data, long long size, long long i, float* out) {
  kspec::RawView<float> v{};
  v.ptr_ = data; v.size_ = size; v.ndim_ = 1; v.c_contiguous_ = 1; v.shape_[0] = size; v.strides_[0] = 4;
  try {
    *out = v[i];
    const long long idx[1] = {i};
    *out += v[idx];
    return 0;
  } catch (...) {
    return 1;
  }
}
"""


def test_rawview_checks_bounds_on_the_host() -> None:
    lib = load(RAWVIEW)
    data = np.arange(4, dtype=np.float32)
    out = np.zeros(1, np.float32)
    args = (ctypes.c_void_p(data.ctypes.data), ctypes.c_longlong(4))
    assert lib.read(*args, ctypes.c_longlong(3), ctypes.c_void_p(out.ctypes.data)) == 0 and out[0] == 6.0
    for bad in (4, -1, 1 << 40):
        assert lib.read(*args, ctypes.c_longlong(bad), ctypes.c_void_p(out.ctypes.data)) == 1
