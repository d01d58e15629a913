"""Test helpers of tests/launch (not part of the product): headless Chromium for the dashboard
tests (`chromium`), plausible metrics records without Ray (`synthetic_metrics`), and launched
runs that never outlive the test (`launched`: own process group, dies with the test process).
Importable as `launch_testing.*` because tests/launch/conftest.py puts tests/launch/support on
sys.path."""
