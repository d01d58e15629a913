"""Safe parsing of LeetCode-style literal text (`n = 7, s = "ab", root = [1,null,2]`).

LeetCodeDataset mixes JSON (`null`, `true`) and Python (`None`, `True`, `'a'`) spellings. We
parse with `ast` and convert only literal nodes (numbers, strings, lists, tuples, dicts, sets,
unary minus, and the names null/true/false/None/True/False/inf/nan); anything else — a call,
an attribute, an arbitrary name — is refused with LiteralError. Nothing is ever evaluated.
"""

from __future__ import annotations

import ast
import json
import math

_NAMES = {
    "null": None,
    "None": None,
    "true": True,
    "True": True,
    "false": False,
    "False": False,
    "inf": math.inf,
    "nan": math.nan,
}


class LiteralError(ValueError):
    """Text that is not a plain literal (or a `name = literal, ...` list of them)."""


def _convert(node: ast.AST):
    if isinstance(node, ast.Constant) and isinstance(
        node.value, (str, int, float, bool, type(None))
    ):
        return node.value
    if isinstance(node, ast.Name) and node.id in _NAMES:
        return _NAMES[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _convert(node.operand)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_convert(e) for e in node.elts]
    if isinstance(node, ast.Dict) and None not in node.keys:
        keys = [_convert(k) for k in node.keys]
        if all(isinstance(k, str) for k in keys):
            return dict(zip(keys, [_convert(v) for v in node.values], strict=True))
        raise LiteralError("dict keys must be strings to be JSON")
    raise LiteralError(f"not a plain literal: {ast.dump(node)[:80]}")


def parse_literal(text: str):
    """Parse one literal value (JSON or Python spelling) into plain JSON-able data."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as e:
        raise LiteralError(f"cannot parse {text[:60]!r} ({e.msg})") from None
    return _convert(tree.body)


def parse_named_args(text: str) -> list[tuple[str, object]]:
    """Parse `a = 1, b = [2, null]` into `[("a", 1), ("b", [2, None])]`, in the order given."""
    try:
        call = ast.parse(f"_({text})", mode="eval").body
    except SyntaxError as e:
        raise LiteralError(f"cannot parse arguments {text[:60]!r} ({e.msg})") from None
    assert isinstance(call, ast.Call)
    if call.args or any(k.arg is None for k in call.keywords):
        raise LiteralError(f"expected only `name = value` pairs in {text[:60]!r}")
    return [(k.arg, _convert(k.value)) for k in call.keywords]


def to_json(value) -> str:
    """One JSON value on one line (infinities as `Infinity`, as Python's json writes them)."""
    return json.dumps(value, ensure_ascii=False)
