"""What several test modules share: kernels and cases, array fixtures, a fake driver, build helpers (not tests).

Imported as ``helpers.<module>``: pytest puts tests/ on ``sys.path`` (tests/conftest.py lives there).
"""
