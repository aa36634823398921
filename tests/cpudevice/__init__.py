"""Tests of the CPU device model (`src.cpudevice`), one file per CuPy
module. A package, so that its files may share names with tests/ (both
have a test_memory.py); `tests/` itself is on sys.path (conftest.py), so
`modelkit` and `subproc` import from here as from anywhere in tests/."""
