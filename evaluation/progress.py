"""The evaluation's progress line on stderr: done/total samples, samples/s, ETA, verdict tally.
On a terminal one line rewritten in place (\\r); otherwise (a log file, CI) plain lines."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO


def format_eta(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    s = int(round(seconds))
    h, rest = divmod(s, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60:02d}:{rest % 60:02d}"


def progress_text(state: dict[str, Any]) -> str:
    """One line from the engine's progress state (done, total, elapsed_s, generated, judged,
    passed, label)."""
    done = state["done"]
    total = state["total"]
    elapsed = max(state["elapsed_s"], 1e-9)
    rate = done / elapsed
    eta = (total - done) / rate if rate > 0 else None
    width = 24
    filled = width * done // max(1, total)
    label = f"{state['label']} " if state.get("label") else ""
    return (
        f"{label}[{'#' * filled}{'.' * (width - filled)}] {done}/{total} samples "
        f"| {rate:.2f}/s | ETA {format_eta(eta)} | generated {state.get('generated', 0)} "
        f"| judged {state.get('judged', 0)} | passed {state.get('passed', 0)}"
    )


class ProgressLine:
    """Callable the engine reports to; `close()` ends the line."""

    def __init__(self, stream: TextIO | None = None, tty: bool | None = None):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self._open = False
        self._last = 0.0

    def __call__(self, state: dict[str, Any]) -> None:
        text = progress_text(state)
        if self.tty:
            self.stream.write("\r" + text + "  ")
            self._open = True
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
        self._last = time.monotonic()

    def close(self) -> None:
        if self._open:
            self.stream.write("\n")
            self.stream.flush()
            self._open = False
