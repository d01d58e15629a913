"""tests/launch: the launch room's tests. Their helpers for launched runs, Chromium and synthetic
metrics are `launch_testing.*` (tests/support/launch_testing, put on sys.path by
tests/conftest.py); tests that only need *a* live run of the tiny config use the shared one in
tests/live instead of launching their own (docs/testing.md)."""
