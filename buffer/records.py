"""Records <-> msgpack-able dicts, with validation that names the bad field: the generic codec.

A record is a dataclass of microcoder/protocol.py (every `Message`, and the `PromptAssignment`
a `Prompts` reply carries). Field kinds, chosen by annotation:
- plain values (int, float, str, bool, list, dict of plain values): stored as is;
- nested records: a dataclass (one) or a `list[` dataclass `]` (a list).

`from_wire` checks presence and type of every field and raises `MessageError` (a ValueError)
whose text says which record and field is wrong; nothing here ever evaluates or unpickles input.
The records that carry the data volume, Group and GroupScores with their numeric arrays, are
not sent through it: their one wire form is the columnar codec, buffer/codec.py.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any


class MessageError(ValueError):
    """A message or record that does not match its schema; `code` classifies it for counters."""

    def __init__(self, message: str, code: str = "bad_field"):
        super().__init__(message)
        self.code = code
        self.rid = 0
        """Request id of the message it was found in, when known (for the error reply)."""


_PLAIN = {
    int: (int,),
    float: (int, float),
    str: (str,),
    bool: (bool,),
    bytes: (bytes,),
    list: (list, tuple),
    dict: (dict,),
}


def _plain_types(annotation: Any) -> tuple[type, ...]:
    origin = typing.get_origin(annotation) or annotation
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        out: tuple[type, ...] = ()
        for arg in typing.get_args(annotation):
            out += (type(None),) if arg is type(None) else _plain_types(arg)
        return out
    if origin not in _PLAIN:
        raise TypeError(f"record field type {annotation!r} is not supported on the wire")
    return _PLAIN[origin]


_MISSING = object()
_SCHEMAS: dict[type, list[tuple[str, str, Any, bool]]] = {}


def _nested(annotation: Any) -> tuple[str, type] | None:
    """("record", cls) for a dataclass field, ("records", cls) for a list of them, else None."""
    if dataclasses.is_dataclass(annotation):
        return "record", annotation
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is list and args and dataclasses.is_dataclass(args[0]):
        return "records", args[0]
    return None


def _fields(cls: type) -> list[tuple[str, str, Any, bool]]:
    """(name, kind, detail, required) per field of a record class, computed once per class."""
    schema = _SCHEMAS.get(cls)
    if schema is None:
        hints = typing.get_type_hints(cls)
        schema = []
        for f in dataclasses.fields(cls):
            required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            nested = _nested(hints[f.name])
            if nested is not None:
                schema.append((f.name, nested[0], nested[1], required))
            else:
                schema.append((f.name, "plain", _plain_types(hints[f.name]), required))
        _SCHEMAS[cls] = schema
    return schema


def to_wire(record: Any) -> dict[str, Any]:
    """A record (a message or a record nested in one) as a dict of msgpack-able values."""
    out: dict[str, Any] = {}
    for name, kind, _, _ in _fields(type(record)):
        value = getattr(record, name)
        if kind == "record":
            out[name] = to_wire(value)
        elif kind == "records":
            out[name] = [to_wire(v) for v in value]
        else:
            out[name] = value
    return out


def from_wire(cls: type, data: Any) -> Any:
    """Check `data` against the record class's schema and build the record (MessageError if
    not)."""
    where = cls.__name__
    if not isinstance(data, dict):
        raise MessageError(f"{where}: expected a map, got {type(data).__name__}")
    kwargs: dict[str, Any] = {}
    for name, kind, detail, required in _SCHEMAS.get(cls) or _fields(cls):
        value = data.get(name, _MISSING)
        if value is _MISSING:
            if required:
                raise MessageError(f"{where}: missing field '{name}'")
        elif kind == "plain" and type(value) in detail:
            kwargs[name] = value  # the common case, checked exactly (bool is not int)
        else:
            kwargs[name] = _decode_value(where, name, kind, detail, value)
    return cls(**kwargs)


def _decode_value(where: str, name: str, kind: str, detail: Any, value: Any) -> Any:
    if kind == "record":
        return from_wire(detail, value)
    if kind == "records":
        if not isinstance(value, (list, tuple)):
            raise MessageError(f"{where}.{name}: expected a list of {detail.__name__}")
        return [from_wire(detail, v) for v in value]
    if not isinstance(value, detail) or (isinstance(value, bool) and bool not in detail):
        raise MessageError(f"{where}.{name}: expected {detail[0].__name__}, got {value!r:.40}")
    return value
