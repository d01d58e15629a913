"""Problems that declare a checker program: it decides whether an output is accepted.

The checker is the problem set's own (trusted) code, so it runs on the host, in a separate
interpreter (`python -I checker.py input expected actual`, exit 0 = accept), never inside the
program's sandbox and never in the judge's own process.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

CHECKER_TIMEOUT_S = 30.0


def run_checker(source: str, test_input: str, expected: str, actual: str) -> tuple[bool, str]:
    """Run the checker on one test; returns (accepted, its message when not)."""
    with tempfile.TemporaryDirectory(prefix="microcoder-checker-") as tmp:
        paths = []
        for name, text in (
            ("checker.py", source),
            ("input", test_input),
            ("expected", expected),
            ("actual", actual),
        ):
            path = Path(tmp, name)
            path.write_text(text)
            paths.append(str(path))
        try:
            proc = subprocess.run(
                [sys.executable, "-I", *paths],
                capture_output=True,
                text=True,
                timeout=CHECKER_TIMEOUT_S,
                cwd=tmp,
            )
        except subprocess.TimeoutExpired:
            return False, f"checker timed out after {CHECKER_TIMEOUT_S:g} s"
    if proc.returncode == 0:
        return True, ""
    return False, (proc.stdout + proc.stderr).strip()[-300:] or f"checker exit {proc.returncode}"
