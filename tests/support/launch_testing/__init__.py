"""Test helpers of the launched-run tests (tests/live, tests/launch; not part of the product):
headless Chromium for the dashboard tests (`chromium`), plausible metrics records without Ray
(`synthetic_metrics`), launched runs that never outlive the test (`launched`: own process group,
dies with the test process) and deadline-bound waits (`waiting`). Importable as
`launch_testing.*` because tests/conftest.py puts tests/support on sys.path."""
