"""Corrupted variants of a reference solution, as a model could write them (`bench peer`).

Each variant is one small AST (or, for the syntax error, text) transform of the reference's
entry method `Solution.<fn_name>`; where a transform has several places to apply, the place is
chosen by a random.Random seeded from (seed, problem id, variant name), so the same inputs give
the same variants on every run. A transform that does not apply (no `range` call, no comparison,
not an `int` method, ...) or whose result is the reference itself (same AST) gives no variant.

Variants, by name (the first three are correct programs in another form or intentionally slow):
  debug-print        prints its first argument first, then answers as the reference (correct)
  float-return       `return float(x)` in an `-> int` method (wrong on a real judge)
  true-division      the first `//` becomes `/`
  return-plus-one    one `return x` becomes `return x + 1` in an `-> int` method
  range-minus-one    one `range(..., stop)` becomes `range(..., stop - 1)`
  flip-compare       one of `<`, `<=`, `>`, `>=`, `==`, `!=` turned into its neighbour
  early-return       `return <constant of the return type>` as the first statement
  print-return       every `return x` becomes `return print(x)` (prints, returns None)
  wrong-name         the method renamed to snake_case (or with a trailing `_`)
  syntax-error       the colon of the method's `def` line removed
  infinite-loop      `while True: pass` as the first statement (both judges spend the limit)
"""

from __future__ import annotations

import ast
import random
import re
import zlib
from collections.abc import Callable

VARIANTS = (
    "debug-print",
    "float-return",
    "true-division",
    "return-plus-one",
    "range-minus-one",
    "flip-compare",
    "early-return",
    "print-return",
    "wrong-name",
    "syntax-error",
    "infinite-loop",
)
FLIPS = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
}
DEFAULTS = {"int": "0", "bool": "False", "str": "''", "float": "0.0", "List": "[]", "list": "[]"}


def _method(tree: ast.Module, fn_name: str) -> ast.FunctionDef | None:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Solution":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == fn_name:
                    return item
    return None


def _own_nodes(fn: ast.FunctionDef):
    """Nodes of the method's body, not descending into nested functions, lambdas or classes."""
    stack = list(reversed(fn.body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _all_nodes(fn: ast.FunctionDef):
    for stmt in fn.body:
        yield from ast.walk(stmt)


def _returns(fn: ast.FunctionDef) -> list[ast.Return]:
    return [n for n in _own_nodes(fn) if isinstance(n, ast.Return) and n.value is not None]


def _return_type(fn: ast.FunctionDef) -> str:
    ann = fn.returns
    if isinstance(ann, ast.Subscript):
        ann = ann.value
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        return ann.value
    return ann.id if isinstance(ann, ast.Name) else ""


def _expr(src: str) -> ast.expr:
    return ast.parse(src, mode="eval").body


def _debug_print(fn, rng) -> bool:
    args = [a.arg for a in fn.args.args[1:]]
    shown = args[0] if args else "'called'"
    fn.body.insert(0, ast.parse(f"print('debug:', {shown})").body[0])
    return True


def _float_return(fn, rng) -> bool:
    if _return_type(fn) != "int" or not _returns(fn):
        return False
    for r in _returns(fn):
        r.value = ast.Call(ast.Name("float", ast.Load()), [r.value], [])
    return True


def _true_division(fn, rng) -> bool:
    places = [n for n in _all_nodes(fn) if isinstance(n, (ast.BinOp, ast.AugAssign))]
    places = [n for n in places if isinstance(n.op, ast.FloorDiv)]
    if not places:
        return False
    places[0].op = ast.Div()
    return True


def _return_plus_one(fn, rng) -> bool:
    if _return_type(fn) != "int" or not _returns(fn):
        return False
    r = rng.choice(_returns(fn))
    r.value = ast.BinOp(r.value, ast.Add(), ast.Constant(1))
    return True


def _range_minus_one(fn, rng) -> bool:
    calls = [n for n in _all_nodes(fn) if isinstance(n, ast.Call) and n.args]
    calls = [c for c in calls if isinstance(c.func, ast.Name) and c.func.id == "range"]
    if not calls:
        return False
    call = rng.choice(calls)
    stop = 0 if len(call.args) == 1 else 1
    call.args[stop] = ast.BinOp(call.args[stop], ast.Sub(), ast.Constant(1))
    return True


def _flip_compare(fn, rng) -> bool:
    places = [n for n in _all_nodes(fn) if isinstance(n, ast.Compare) and type(n.ops[0]) in FLIPS]
    if not places:
        return False
    node = rng.choice(places)
    node.ops[0] = FLIPS[type(node.ops[0])]()
    return True


def _early_return(fn, rng) -> bool:
    value = DEFAULTS.get(_return_type(fn), "None")
    fn.body.insert(0, ast.Return(_expr(value)))
    return True


def _print_return(fn, rng) -> bool:
    returns = _returns(fn)
    if not returns:
        return False
    for r in returns:  # `return x` -> `return print(x)`: prints x, returns None
        r.value = ast.Call(ast.Name("print", ast.Load()), [r.value], [])
    return True


def _wrong_name(fn, rng) -> bool:
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", fn.name).lower()
    fn.name = snake if snake != fn.name else fn.name + "_"
    return True


def _infinite_loop(fn, rng) -> bool:
    fn.body.insert(0, ast.parse("while True:\n    pass").body[0])
    return True


AST_TRANSFORMS: dict[str, Callable[[ast.FunctionDef, random.Random], bool]] = {
    "debug-print": _debug_print,
    "float-return": _float_return,
    "true-division": _true_division,
    "return-plus-one": _return_plus_one,
    "range-minus-one": _range_minus_one,
    "flip-compare": _flip_compare,
    "early-return": _early_return,
    "print-return": _print_return,
    "wrong-name": _wrong_name,
    "infinite-loop": _infinite_loop,
}


def _syntax_error(tree: ast.Module, fn_name: str) -> str | None:
    lines = ast.unparse(tree).splitlines()
    for i, line in enumerate(lines):
        if line.lstrip().startswith(f"def {fn_name}(") and line.endswith(":"):
            lines[i] = line[:-1]
            text = "\n".join(lines) + "\n"
            try:
                ast.parse(text)
            except SyntaxError:
                return text
            return None
    return None


def make_variant(reference: str, fn_name: str, name: str, problem_id: str, seed: int) -> str | None:
    """The variant `name` of `reference`, or None when it does not apply or equals it."""
    if name not in VARIANTS:
        raise ValueError(f"unknown variant {name!r}; choose from {', '.join(VARIANTS)}")
    try:
        tree = ast.parse(reference)
    except SyntaxError:
        return None
    if _method(tree, fn_name) is None:
        return None
    if name == "syntax-error":
        return _syntax_error(tree, fn_name)
    rng = random.Random(zlib.crc32(f"{seed}/{problem_id}/{name}".encode()))
    if not AST_TRANSFORMS[name](_method(tree, fn_name), rng):
        return None
    code = ast.unparse(ast.fix_missing_locations(tree)) + "\n"
    if ast.dump(ast.parse(code)) == ast.dump(ast.parse(reference)):
        return None
    return code


def variants_for(
    reference: str, fn_name: str, problem_id: str, names: list[str], seed: int
) -> list[tuple[str, str]]:
    """[(variant name, code)] of the variants of `names` that apply, in the order given."""
    out = []
    for name in names:
        code = make_variant(reference, fn_name, name, problem_id, seed)
        if code is not None:
            out.append((name, code))
    return out
