"""Decoding LiveCodeBench's private tests (base64 → zlib → pickle) without running any code.

`pickle.loads` on downloaded data can execute anything (a `__reduce__` that calls `os.system`).
`PlainUnpickler.find_class` refuses EVERY global, so no class, function or module can be looked
up: only the opcodes for str / bytes / int / float / bool / None / list / tuple / dict / set can
succeed. The result is then checked to be made of exactly those plain types.
"""

from __future__ import annotations

import base64
import binascii
import io
import pickle
import zlib

MAX_DECOMPRESSED_BYTES = 1 << 30
"""Refuse a private-test blob that inflates beyond this (a zip bomb); 1 GiB."""

_PLAIN = (str, bytes, int, float, bool, type(None))


class UnsafePickleError(ValueError):
    """The pickle asked for a global (class/function) or produced a non-plain object."""


class PlainUnpickler(pickle.Unpickler):
    """An Unpickler that can only build plain data: every global lookup is refused."""

    def find_class(self, module: str, name: str):  # noqa: D401 - pickle API
        raise UnsafePickleError(
            f"pickle refers to global {module}.{name}; only plain str/list/dict/number data is "
            "accepted (the row may be tampered with; re-download it from the dataset)"
        )

    def persistent_load(self, pid):
        raise UnsafePickleError("pickle uses persistent ids; only plain data is accepted")


def _check_plain(value, depth: int = 0) -> None:
    if depth > 100:
        raise UnsafePickleError("pickle nests deeper than 100 levels")
    if isinstance(value, _PLAIN):
        return
    if isinstance(value, (list, tuple, set, frozenset)):
        for v in value:
            _check_plain(v, depth + 1)
        return
    if isinstance(value, dict):
        for k, v in value.items():
            _check_plain(k, depth + 1)
            _check_plain(v, depth + 1)
        return
    raise UnsafePickleError(
        f"pickle produced a {type(value).__name__}; only plain data is accepted"
    )


def plain_unpickle(data: bytes):
    """Unpickle `data` allowing only plain builtin values; raise UnsafePickleError otherwise."""
    try:
        value = PlainUnpickler(io.BytesIO(data)).load()
    except UnsafePickleError:
        raise
    except Exception as e:  # malformed stream: any unpickling failure is a format error
        raise UnsafePickleError(f"not a valid pickle ({type(e).__name__}: {e})") from None
    _check_plain(value)
    return value


def _inflate(data: bytes, limit: int) -> bytes:
    d = zlib.decompressobj()
    out = d.decompress(data, limit + 1)
    if len(out) > limit or d.unconsumed_tail:
        raise UnsafePickleError(f"compressed blob inflates beyond {limit} bytes")
    return out + d.flush()


def decode_b64_zlib_pickle(text: str, limit: int = MAX_DECOMPRESSED_BYTES):
    """Decode LiveCodeBench's `private_test_cases` blob into plain Python data.

    Raises UnsafePickleError for anything but plain data, ValueError for bad base64/zlib.
    """
    try:
        raw = base64.b64decode(text, validate=False)
    except (binascii.Error, ValueError) as e:
        raise ValueError(f"not base64 ({e})") from None
    try:
        inflated = _inflate(raw, limit)
    except zlib.error as e:
        raise ValueError(f"not zlib-compressed ({e})") from None
    return plain_unpickle(inflated)
