"""Reading raw rows from JSONL / JSON-array files, plain or gzip-compressed.

A row is yielded with its position: the 1-based line number for JSONL, the 1-based row index for
a JSON array (so an error can say `file:N` either way). Blank JSONL lines are skipped.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

from microcoder.data.problem import ProblemFormatError


def open_text(path: Path):
    """Open `path` as UTF-8 text, transparently decompressing `.gz`."""
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def _first_char(path: Path) -> str:
    with open_text(path) as f:
        while True:
            c = f.read(1)
            if not c or not c.isspace():
                return c


def iter_rows(path: Path) -> Iterator[tuple[int, object]]:
    """Yield `(position, row)` for every row of a JSONL file or a JSON array file.

    A file whose first non-blank character is `[` is a JSON array; anything else is JSONL.
    An undecodable JSONL line is yielded as a ProblemFormatError in place of the row (so a lenient
    load can count it and go on); an undecodable JSON array raises ProblemFormatError.
    """
    source = str(path)
    if _first_char(path) == "[":
        with open_text(path) as f:
            try:
                data = json.load(f)
            except json.JSONDecodeError as e:
                raise ProblemFormatError(
                    source,
                    e.lineno,
                    "<json>",
                    f"not valid JSON ({e.msg}); fix or re-export the file",
                ) from None
        yield from enumerate(data, start=1)
        return
    with open_text(path) as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as e:
                yield (
                    lineno,
                    ProblemFormatError(
                        source, lineno, "<json>", f"not valid JSON ({e.msg} at column {e.colno})"
                    ),
                )
