"""tests/launch: its test helpers live in tests/launch/support/launch_testing/ (Chromium, synthetic
metrics), outside the product; the tests import them as `launch_testing.*` (pytest runs with
--import-mode=importlib, which puts no test folder on sys.path, so this conftest does)."""

from __future__ import annotations

import sys
from pathlib import Path

SUPPORT = str(Path(__file__).with_name("support"))
if SUPPORT not in sys.path:
    sys.path.insert(0, SUPPORT)
