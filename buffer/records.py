"""Typed records <-> msgpack-able dicts, with validation that names the bad field.

A record is a dataclass deriving from `Record`. Field kinds, chosen by annotation and metadata:
- plain values (int, float, str, bool, list, dict of plain values): stored as is;
- nested records: `record_field(PromptAssignment)` (one) or `record_field(PromptAssignment,
  many=True)` (a list).

Decoding checks presence and type of every field and raises `MessageError` (a ValueError) whose
text says which record and field is wrong; nothing here ever evaluates or unpickles input.
It serves every message (buffer/messages.py). The records that carry the data volume, Group
and GroupScores with their numeric arrays (buffer/groups.py), are not Records: their one wire
form is the columnar codec, buffer/codec.py.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, ClassVar


class MessageError(ValueError):
    """A message or record that does not match its schema; `code` classifies it for counters."""

    def __init__(self, message: str, code: str = "bad_field"):
        super().__init__(message)
        self.code = code
        self.rid = 0
        """Request id of the message it was found in, when known (for the error reply)."""


def record_field(cls: type, many: bool = False, **kw: Any) -> Any:
    """A nested record field (`many=True`: a list of records)."""
    if many and "default" not in kw and "default_factory" not in kw:
        kw["default_factory"] = list
    return dataclasses.field(metadata={"record": cls, "many": many}, **kw)


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


class Record:
    """Base of every wire record: `to_wire()` gives a msgpack-able dict, `from_wire()` checks it."""

    _schema: ClassVar[list[tuple[str, str, Any, bool]] | None] = None

    @classmethod
    def _fields(cls) -> list[tuple[str, str, Any, bool]]:
        """(name, kind, detail, required) per field, computed once per class."""
        if cls.__dict__.get("_schema") is None:
            hints = typing.get_type_hints(cls)
            schema = []
            for f in dataclasses.fields(cls):  # type: ignore[arg-type]
                required = (
                    f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
                )
                if "record" in f.metadata:
                    kind = "records" if f.metadata["many"] else "record"
                    schema.append((f.name, kind, f.metadata["record"], required))
                else:
                    schema.append((f.name, "plain", _plain_types(hints[f.name]), required))
            cls._schema = schema
        return cls._schema  # type: ignore[return-value]

    def to_wire(self) -> dict[str, Any]:
        """This record as a dict of msgpack-able values."""
        out: dict[str, Any] = {}
        for name, kind, _, _ in self._fields():
            value = getattr(self, name)
            if kind == "record":
                out[name] = value.to_wire()
            elif kind == "records":
                out[name] = [v.to_wire() for v in value]
            else:
                out[name] = value
        return out

    @classmethod
    def from_wire(cls, data: Any) -> Any:
        """Check `data` against this record's schema and build the record (MessageError if not)."""
        where = cls.__name__
        if not isinstance(data, dict):
            raise MessageError(f"{where}: expected a map, got {type(data).__name__}")
        kwargs: dict[str, Any] = {}
        for name, kind, detail, required in cls.__dict__.get("_schema") or cls._fields():
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
        return detail.from_wire(value)
    if kind == "records":
        if not isinstance(value, (list, tuple)):
            raise MessageError(f"{where}.{name}: expected a list of {detail.__name__}")
        return [detail.from_wire(v) for v in value]
    if not isinstance(value, detail) or (isinstance(value, bool) and bool not in detail):
        raise MessageError(f"{where}.{name}: expected {detail[0].__name__}, got {value!r:.40}")
    return value
