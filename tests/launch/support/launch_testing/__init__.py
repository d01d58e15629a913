"""Test helpers of tests/launch (not part of the product): headless Chromium for the dashboard
tests (`chromium`) and plausible metrics records without Ray (`synthetic_metrics`). Importable as
`launch_testing.*` because tests/launch/conftest.py puts tests/launch/support on sys.path."""
