"""Which class a kernel's failed compile raises, for the adapters above this layer (they use kernels, never the
compiler directly): kspec.cupy makes it also CuPy's ``CompileException``, so code written for CuPy that catches
a compile failure to fall back on another implementation (cuCIM's shared-memory filters) still catches it."""

from __future__ import annotations

from ..compiler import set_compile_error_type

__all__ = ["set_compile_error_type"]
