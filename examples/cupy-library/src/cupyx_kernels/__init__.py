"""The precompiled kernels of the cupyx.scipy calls app.py makes (captured by ``kspec capture``).

Nothing needs to import this package: installing its wheel registers the binaries
(``<prefix>/share/kspec/binaries/cupyx_kernels.json``), and kspec serves them by content to the same constructor
calls in any program run with ``python -m kspec.cupy``.
"""
