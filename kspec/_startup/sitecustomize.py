"""Python runs this at start-up in processes that ``python -m kspec.cupy`` or ``kspec capture`` starts (they put this
folder first on PYTHONPATH and set KSPEC_CUPY=1): test workers, multiprocessing children, subprocesses of the
program. It arms kspec's swap of CuPy's kernel constructors for the moment CuPy is imported, starts kspec
capture's recorder where KSPEC_CAPTURE_DIR is set, then runs the sitecustomize this one shadows, if there is one."""

import importlib.machinery
import importlib.util
import os
import sys

if os.environ.get("KSPEC_CUPY") == "1":
    try:
        from kspec.cupy import swap_on_import

        swap_on_import()
    except ImportError as exc:  # kspec not importable in this interpreter: run the program as it is
        print(f"kspec.cupy: KSPEC_CUPY=1 but kspec could not be imported ({exc}); CuPy stays CuPy", file=sys.stderr)

if os.environ.get("KSPEC_CAPTURE_DIR"):
    try:
        from kspec.capturer import record_from_environment

        record_from_environment()
    except ImportError as exc:
        print(f"kspec capture: KSPEC_CAPTURE_DIR is set but kspec could not be imported ({exc})", file=sys.stderr)

_here = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.machinery.PathFinder.find_spec(
    "sitecustomize", [p for p in sys.path if os.path.abspath(p or ".") != _here]
)
if _spec is not None and _spec.loader is not None:
    _module = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_module)
