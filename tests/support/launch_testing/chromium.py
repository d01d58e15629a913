"""Load a page in headless Chromium (Debian's `chromium`): its DOM after scripts ran, a screenshot.

Used by the dashboard tests and the launch integration test:

    dom = page_dom("http://127.0.0.1:8266/", budget_ms=8000, screenshot="tests/artifacts/x.png")
    points = chart_points(dom)          # {"tokens": 12, "hist": 3, ...} from data-points attributes
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--hide-scrollbars",
)


def find_chromium() -> str:
    """Path of the Chromium binary, or an error that says how to install it."""
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    raise FileNotFoundError(
        "headless Chromium not found: install it (Debian/Ubuntu: `sudo apt-get install -y chromium`, "
        "or run scripts/setup.sh as root)"
    )


def _run(args: list[str], timeout_s: float) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="mc-chromium-") as profile:
        cmd = [find_chromium(), *FLAGS, f"--user-data-dir={profile}", *args]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    if res.returncode != 0:
        raise RuntimeError(f"chromium exited {res.returncode}: {res.stderr[-2000:]}")
    return res


def page_dom(
    url: str,
    budget_ms: int = 8000,
    screenshot: str | Path | None = None,
    window: tuple[int, int] = (1400, 1200),
    timeout_s: float = 120.0,
) -> str:
    """The page's DOM after `budget_ms` of virtual time (scripts and fetches ran); optionally
    also save a PNG screenshot of a second load of the page (same budget)."""
    size = f"--window-size={window[0]},{window[1]}"
    dom = _run([f"--virtual-time-budget={budget_ms}", size, "--dump-dom", url], timeout_s).stdout
    if screenshot is not None:
        shot = Path(screenshot).resolve()
        shot.parent.mkdir(parents=True, exist_ok=True)
        _run([f"--virtual-time-budget={budget_ms}", size, f"--screenshot={shot}", url], timeout_s)
        if not shot.exists():
            raise RuntimeError(f"chromium wrote no screenshot at {shot}")
    return dom


_CARD = re.compile(r'<div class="card" id="chart-([\w-]+)">(.*?)</svg>', re.S)
_SVG_POINTS = re.compile(r'<svg[^>]*class="chart"[^>]*data-points="(\d+)"')
_SERIES = re.compile(r'<path[^>]*data-series="([^"]+)"[^>]*data-points="(\d+)"')


def chart_points(dom: str) -> dict[str, int]:
    """Points drawn per chart (chart id -> count), read from the dumped DOM."""
    out = {}
    for cid, body in _CARD.findall(dom):
        m = _SVG_POINTS.search(body)
        out[cid] = int(m.group(1)) if m else 0
    return out


def series_points(dom: str) -> dict[tuple[str, str], int]:
    """Points per (chart id, series key), e.g. ("tokens", "gen_tokens_per_s") -> 12."""
    out = {}
    for cid, body in _CARD.findall(dom):
        for key, n in _SERIES.findall(body):
            out[(cid, key)] = int(n)
    return out


def body_attrs(dom: str) -> dict[str, str]:
    """The data-* attributes of <body> (the page writes data-next and data-steps there)."""
    m = re.search(r"<body([^>]*)>", dom)
    return dict(re.findall(r'data-([\w-]+)="([^"]*)"', m.group(1))) if m else {}
