"""Checks of constructor arguments shared by the kernel classes (CuPy's signatures, kspec's strictness)."""

from __future__ import annotations

from ._errors import KspecTypeError


def flag(value: object, param: str) -> bool:
    """A CuPy flag argument (``reduce_dims``, ``no_return``, ``enable_cooperative_groups``...) as a bool.

    CuPy stores these in ``bint`` attributes, so it takes any truthy object: ``no_return='false'`` means
    True there. kspec takes what CuPy code passes in practice, bools (NumPy's too) and the ints 0 and 1,
    and refuses the rest (a string, None, 2.0) with a TypeError naming the parameter.
    """
    if isinstance(value, bool):
        return value
    if type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_"):  # numpy.bool_ (NumPy 1 and 2)
        return bool(value)
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise KspecTypeError(f"{param}: expected True or False, got {type(value).__name__} {value!r}")


def options_tuple(options: object) -> tuple[str, ...]:
    """``options=`` (compiler options): a str, or an iterable of str, as a tuple; TypeError otherwise."""
    if isinstance(options, str):
        return (options,)
    try:
        result: tuple[object, ...] = tuple(options)  # type: ignore[arg-type]
    except TypeError:
        raise KspecTypeError(f"options: expected a tuple of str, got {type(options).__name__}") from None
    for option in result:
        if not isinstance(option, str):
            raise KspecTypeError(f"options: every option must be a str, got {option!r}")
    return result  # type: ignore[return-value]  # every item was checked to be a str
