"""Every kernel of the repository's own specs/ that declares or derives a gradient (issue [AD]): ``kspec.vjp``
against central finite differences of the kernel itself, on the CPU device (NumPy arrays) and on the GPU (kspec
arrays), broadcast inputs and reduction axes included."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

import kspec
from kspec.spec import load_file

from helpers.grad_cases import numeric_vjp

SPECS = Path(__file__).resolve().parents[2] / "specs"
WITH_GRAD = [spec for path in sorted(SPECS.glob("*.toml")) for spec in load_file(path) if getattr(spec, "grad", None) is not None]


def _binding(spec):
    """The placeholder types to test with: float64 where an instantiation has it, else float32."""
    options = []
    for inst in spec.instantiations or [{}]:
        names = list(inst)
        for values in itertools.product(*[v if isinstance(v, list) else [v] for v in inst.values()]):
            options.append(dict(zip(names, values)))
    for wanted in ("float64", "float32"):
        for binding in options:
            if all(v == wanted for v in binding.values()):
                return binding
    return options[0]


def _inputs(spec, binding, rng):
    """Host arrays for the inputs: the first of shape (3, 4), the others (4,) (broadcast) where there are several."""
    arrays = []
    for k, param in enumerate(spec.in_params):
        dtype = binding.get(param.type, param.type)
        shape = (3, 4) if k == 0 or spec.KIND == "reduction" else (4,)
        value = rng.standard_normal(shape) + (1.5 if param.name == "cap" else 0.0)
        arrays.append(value.astype(dtype))
    return arrays


def test_specs_declare_gradients():
    assert {"squared_diff", "saxpy", "relu", "clipped_relu", "l2norm", "sum_of_squares"} <= {s.name for s in WITH_GRAD}


@pytest.mark.parametrize("where", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("spec", WITH_GRAD, ids=lambda s: s.name)
def test_the_gradient_of_every_spec_kernel_matches_finite_differences(request, where, spec):
    if where == "cpu":
        request.getfixturevalue("on_cpu_device")
        to_device, to_host = (lambda a: a), np.asarray
    else:
        to_device, to_host = kspec.asarray, (lambda a: a.get())
    binding = _binding(spec)
    make = kspec.ReductionKernel if spec.KIND == "reduction" else kspec.ElementwiseKernel
    kernel = make.from_spec(spec)
    rng = np.random.default_rng(abs(hash(spec.name)) % 2**32)
    args = _inputs(spec, binding, rng)
    single = all(np.dtype(a.dtype) != np.float64 for a in args)
    eps, rtol = (1e-2, 2e-2) if single else (1e-6, 1e-6)
    for options in ({"axis": None}, {"axis": 1}) if spec.KIND == "reduction" else ({},):
        if any(p.type in binding and all(q.type != p.type for q in spec.in_params) for p in spec.out_params):
            shape = () if options.get("axis") is None else (3,)  # an output-only type: the output given
            options = {**options, "out": to_device(np.zeros(shape, binding[spec.out_params[0].type]))}
        out, back = kspec.vjp(kernel, *[to_device(a) for a in args], **options)
        g = rng.standard_normal(np.shape(to_host(out))).astype(np.asarray(to_host(out)).dtype)
        grads = back(to_device(g))

        def run(*host, options=options):
            got = kernel(*[to_device(np.asarray(h, dtype=a.dtype)) for h, a in zip(host, args)], **options)
            return np.array(to_host(got), copy=True)  # a given out= is rewritten by the next call

        want = numeric_vjp(run, args, g.astype(np.float64), eps=eps)
        names = spec.backward()[0]
        for param, got, expected in zip(spec.in_params, grads, want):
            if param.name not in names:
                assert got is None
                continue
            assert to_host(got).shape == np.shape(expected)
            np.testing.assert_allclose(to_host(got), expected, rtol=rtol, atol=rtol * 10, err_msg=f"{spec.name}: {param.name}")


def test_a_generated_modules_kernel_has_its_gradient(on_cpu_device):
    """The repository's generated module serves plain specs (no Pydantic until a gradient is asked)."""
    import sys

    sys.path.insert(0, str(SPECS.parent))
    try:
        from generated import elementwise
    finally:
        sys.path.remove(str(SPECS.parent))
    kernel = elementwise._KERNELS.squared_diff
    assert kernel.spec.grad == "auto"
    x, y = np.arange(4, dtype=np.float32), np.ones(4, np.float32)
    z, back = kspec.vjp(kernel, x, y)
    gx, gy = back(np.ones(4, np.float32))
    np.testing.assert_allclose(gx, 2 * (x - y))
    np.testing.assert_allclose(gy, -2 * (x - y))
