"""Python function + argument types -> CUDA C++: the function around the body (parameters, head, shared
memory and locals' declarations) and :func:`translate_function`, the entry point.

The translator is one class built in layers, each in its own module: FunctionState (_function_state.py: the
output, names and locals), ExpressionTranslator (_expressions.py), StatementTranslator (_statements.py) and
FunctionTranslator here. Device functions called from the body get translators of their own, made by
:meth:`FunctionTranslator.device_translator` (_device_functions.py receives the calling translator and asks it).
"""

from __future__ import annotations

import ast
from typing import Any

from ._errors import JitTypeError, JitUnsupportedError
from ._module import ModuleState, c_name
from ._source import FunctionSource, read_function, read_only_parameters
from ._statements import StatementTranslator
from ._types import Array, JitType, Scalar, Void
from ._values import Value


class FunctionTranslator(StatementTranslator):
    """Translates one function for one signature: a kernel (``device=False``) or a device function."""

    # -- the function ------------------------------------------------------------------------------------

    def translate(self) -> str:
        """The C++ function (body and signature)."""
        tree = self.src.tree
        args = tree.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults:
            raise self.error(JitUnsupportedError, tree, "kernels take plain positional parameters only (no *args, **kwargs, defaults or keyword-only parameters)")
        names = [a.arg for a in args.args]
        self.read_only = set() if self.device else read_only_parameters(tree, names)
        if len(names) != len(self.types):
            raise self.error(JitTypeError, tree, f"takes {len(names)} argument(s) ({', '.join(names)}), got {len(self.types)}")
        for name, t in zip(names, self.types):
            self.module.note_type(t)
            self.bind_parameter(name, t)
        for stmt in tree.body:
            self.statement(stmt)
        return self.assemble(tree)

    def bind_parameter(self, name: str, t: JitType) -> None:
        cname = self.fresh_name(name)
        if isinstance(t, Array):
            if self.device:
                self.params.append(f"{t.ctype} {cname}")
            else:
                shape = [f"_{name}_shape{k}" for k in range(t.ndim)]
                strides = [f"_{name}_stride{k}" for k in range(t.ndim)]
                # An array the kernel never writes is `const __restrict__`: the compiler may then keep several
                # loads in flight across the stores of a grid-stride loop (the read-only path, as CUDA C++ does).
                const = name in self.read_only
                element = f"const {t.dtype.ctype}" if const else t.dtype.ctype
                self.params.append(f"{element}* {'__restrict__ ' if const else ''}_{name}_data")
                self.params.extend(f"long long {p}" for p in shape + strides)
                self.prologue.append(
                    f"const kspec_jit::array<{element}, {t.ndim}> {cname} = "
                    f"{{_{name}_data, {{{', '.join(shape)}}}, {{{', '.join(strides)}}}}};"
                )
            self.bindings[name] = Value(cname, t)
        elif isinstance(t, Scalar):
            self.params.append(f"{t.ctype} {cname}")
            self.bindings[name] = Value(cname, t)
            self.local_types[name] = t
        else:  # shared arrays and groups passed to device functions
            self.params.append(f"{t.ctype} {cname}")
            self.bindings[name] = Value(cname, t)

    def head(self) -> str:
        """The C++ function's head (a device function's prototype is this and a semicolon)."""
        if self.device:
            return f"__device__ {(self.return_type or Void()).ctype} {self.function_name}({', '.join(self.params)})"
        return f'extern "C" __global__ void {c_name(self.src.tree.name)}({", ".join(self.params)})'

    def assemble(self, tree: ast.FunctionDef) -> str:
        head = self.head()
        dynamic = []
        if self.dynamic_alignment:
            dynamic = [f"extern __shared__ __align__({self.dynamic_alignment}) unsigned char _kspec_dynamic_shared[];"]
        body = [f"    {line}" for line in dynamic + self.shared_declarations + self.prologue + self.declarations]
        return "\n".join([head + " {", *body, *self.lines, "}"])

    def device_translator(self, source: FunctionSource, types: tuple[JitType, ...]) -> FunctionTranslator:
        """A translator for a device function this function calls, in the same translation unit."""
        return FunctionTranslator(source, types, self.module, device=True)


def translate_function(func: Any, types: tuple[JitType, ...], *, device: bool, module: ModuleState | None = None) -> tuple[str, ModuleState, FunctionTranslator]:
    """Translate a kernel for a signature: its C++ (without the module around it) and the module state."""
    module = module if module is not None else ModuleState()
    translator = FunctionTranslator(read_function(func), types, module, device=device)
    if device:
        translator.function_name = c_name(func.__name__)
    module.used_names.add(c_name(func.__name__))
    return translator.translate(), module, translator
