"""What a fresh interpreter imports (tests that keep a module or `--help` light), outside the
product. Importable as `import_probe` because tests/conftest.py puts tests/support on sys.path."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("torch", "transformers", "vllm", "ray", "pydantic")


def heavy_imports(code: str, heavy: tuple[str, ...] = HEAVY) -> list[str]:
    """The modules of `heavy` that a fresh Python process has imported after running `code`."""
    probe = f"{code}\nimport sys\nprint(','.join(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return [m for m in out.stdout.strip().split(",") if m]
