"""Our verdicts vs LiveCodeBench's on the same programs (`bench peer`): pass@1, the confusion
table, and every disagreement put into a named class by an explicit rule (pure functions).

A row is one sample judged by both: a dict with `problem_id`, `sample_index`, `variant`,
`ours` (our verdict: AC WA TLE MLE RE CE SE OLE), `ours_message` (our judge's reason),
`lcb` (bool: LiveCodeBench accepted it) and `lcb_meta` (its metadata: `error_code` -1 compile,
-2 wrong answer, -3 timeout, -4 runtime error, -5 its test-runner failed; `error`,
`error_message`, `output`, `expected`). The classes are tried in CLASSES order, the first
whose rule holds names the row; a disagreement no rule holds is "unclassified".
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable

from microcoder.evaluation.passk import mean_pass_at_k

FLOAT_VARIANTS = ("float-return", "true-division")
"""Variants that return a float where the reference returns an int."""


def _value(text) -> tuple[bool, object]:
    """(parsed, value) of a JSON or Python literal as the judges print them (False when cut)."""
    if not isinstance(text, str):
        return False, None
    for parse in (json.loads, ast.literal_eval):
        try:
            return True, parse(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    return False, None


def _our_pair(message: str) -> tuple[bool, object, object]:
    """(parsed, expected, got) from our functional message "expected E, got G"."""
    m = re.fullmatch(r"expected (.*), got (.*)", message or "", re.S)
    if not m:
        return False, None, None
    (ok_e, e) = _value(m.group(1))
    (ok_g, g) = _value(m.group(2))
    return ok_e and ok_g, e, g


def _int_as(expected, got, kind: type) -> bool:
    """`got` equals `expected` by Python's == while some int of `expected` is a `kind` in `got`."""
    if isinstance(expected, list) and isinstance(got, list) and len(expected) == len(got):
        pairs = list(zip(expected, got, strict=True))
        return all(e == g for e, g in pairs) and any(_int_as(e, g, kind) for e, g in pairs)
    ints = isinstance(expected, int) and not isinstance(expected, bool)
    return ints and isinstance(got, kind) and expected == got


def _float_for_int(row: dict) -> bool:
    parsed, e, g = _our_pair(row["ours_message"])
    if parsed:
        return row["ours"] == "WA" and _int_as(e, g, float)
    return row["ours"] == "WA" and row["variant"] in FLOAT_VARIANTS


def _bool_for_int(row: dict) -> bool:
    parsed, e, g = _our_pair(row["ours_message"])
    return row["ours"] == "WA" and parsed and _int_as(e, g, bool)


def _close(a, b) -> bool:
    """Equal within our judge's tolerance (1e-6 absolute or relative) but not exactly."""
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return a != b and all(x == y or _close(x, y) for x, y in zip(a, b, strict=True))
    nums = (int, float)
    if not (isinstance(a, nums) and isinstance(b, nums)) or a == b:
        return False
    return abs(a - b) <= 1e-6 * max(1.0, abs(a), abs(b))


def _lcb_float_exact(row: dict) -> bool:
    meta = row["lcb_meta"]
    (ok_e, e) = _value(meta.get("expected"))
    (ok_g, g) = _value(meta.get("output"))
    return meta.get("error_code") == -2 and ok_e and ok_g and _close(e, g)


def _lcb_error(row: dict, code: int, needle: str = "") -> bool:
    meta = row["lcb_meta"]
    text = f"{meta.get('error', '')} {meta.get('error_message', '')}"
    return meta.get("error_code") == code and needle in text


Rule = Callable[[dict], bool]
CLASSES: list[tuple[str, str, Rule]] = [
    (
        "float for int: LCB accepts by ==",
        "ours WA, LCB AC; our message shows an int expected and a float of equal value returned "
        "(message cut: the variant returns floats, float-return / true-division)",
        _float_for_int,
    ),
    (
        "bool for int: LCB accepts by ==",
        "ours WA, LCB AC; our message shows an int expected and a bool of equal value returned",
        _bool_for_int,
    ),
    (
        "ours TLE, LCB in time",
        "ours TLE (CPU limit, or wall cap = 3 x limit + 0.5 s), LCB AC",
        lambda r: r["ours"] == "TLE" and r["lcb"],
    ),
    (
        "ours OLE: print cap, LCB has none",
        "ours OLE (functional prints over the 1 MiB floor), "
        "LCB AC (its prints are not captured at all)",
        lambda r: r["ours"] == "OLE" and r["lcb"],
    ),
    (
        "ours MLE, LCB has no memory limit",
        "ours MLE, LCB AC",
        lambda r: r["ours"] == "MLE" and r["lcb"],
    ),
    ("ours sandbox error", "ours SE, LCB AC", lambda r: r["ours"] == "SE" and r["lcb"]),
    (
        "LCB timeout (wall-clock alarm, under load)",
        "ours AC, LCB error_code -3",
        lambda r: r["ours"] == "AC" and _lcb_error(r, -3),
    ),
    (
        "LCB global timeout (reported as TestRunnerError)",
        "ours AC, LCB error_code -5 with IndexError: its process was killed by the global timeout "
        "and left no metadata",
        lambda r: r["ours"] == "AC" and _lcb_error(r, -5, "IndexError"),
    ),
    (
        "LCB missing module",
        "ours AC, LCB runtime error ModuleNotFoundError",
        lambda r: r["ours"] == "AC" and _lcb_error(r, -4, "ModuleNotFoundError"),
    ),
    (
        "LCB exact float compare",
        "ours AC, LCB WA with a number within 1e-6 of the expected",
        lambda r: r["ours"] == "AC" and _lcb_float_exact(r),
    ),
    (
        "LCB harness error",
        "ours AC, LCB error_code -4 or -5 (its runner raised)",
        lambda r: r["ours"] == "AC" and r["lcb_meta"].get("error_code") in (-4, -5),
    ),
]
UNCLASSIFIED = "unclassified"


def classify(row: dict) -> str:
    """The class of a disagreement (ours AC xor LCB AC), UNCLASSIFIED when no rule holds."""
    for name, _, rule in CLASSES:
        if rule(row):
            return name
    return UNCLASSIFIED


def confusion(rows: Iterable[dict]) -> dict[str, int]:
    """Counts of both pass / both fail / ours only (ours AC, LCB not) / LCB only."""
    out = dict.fromkeys(("both_pass", "both_fail", "ours_only", "lcb_only"), 0)
    for r in rows:
        ours = r["ours"] == "AC"
        key = (
            ("both_pass" if r["lcb"] else "ours_only")
            if ours
            else ("lcb_only" if r["lcb"] else "both_fail")
        )
        out[key] += 1
    return out


def pass_at_1(rows: Iterable[dict], judge: str) -> float | None:
    """pass@1 of one judge ("ours" or "lcb"): c / n per problem, averaged over problems."""
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in rows:
        ok = r["ours"] == "AC" if judge == "ours" else bool(r["lcb"])
        per[r["problem_id"]][0] += 1
        per[r["problem_id"]][1] += ok
    return mean_pass_at_k([(n, c) for n, c in per.values()], 1)


def _example(row: dict) -> dict:
    meta = row["lcb_meta"]
    lcb = "AC" if row["lcb"] else f"{meta.get('error_code')} {meta.get('error_message', '')}"
    return {
        "problem_id": row["problem_id"],
        "sample_index": row["sample_index"],
        "variant": row["variant"],
        "ours": row["ours"],
        "ours_message": (row["ours_message"] or "")[:160],
        "lcb": lcb.strip(),
        "lcb_error": str(meta.get("error", ""))[:160],
    }


def by_variant(rows: Iterable[dict]) -> list[dict]:
    """Per variant: samples, accepted by ours / LCB, disagreements."""
    table: dict[str, Counter] = defaultdict(Counter)
    for r in rows:
        t = table[r["variant"]]
        ours = r["ours"] == "AC"
        t["samples"] += 1
        t["ours_ac"] += ours
        t["lcb_ac"] += bool(r["lcb"])
        t["disagree"] += ours != bool(r["lcb"])
    return [{"variant": v, **dict(c)} for v, c in table.items()]


def verdict_pairs(rows: Iterable[dict]) -> dict[str, int]:
    """Counts of "our verdict / LCB result" (AC, or its error_code: -1 compile, -2 WA, -3
    timeout, -4 runtime or loading error, -5 runner error), most frequent first."""
    pairs = Counter(
        f"{r['ours']} / {'AC' if r['lcb'] else r['lcb_meta'].get('error_code')}" for r in rows
    )
    return dict(pairs.most_common())


def compare(rows: list[dict], examples: int = 3) -> dict:
    """The figures of the peer check: pass@1 both ways, confusion, classes, per variant."""
    classes: dict[str, dict] = {}
    for name, rule_text, _ in CLASSES:
        classes[name] = {"count": 0, "rule": rule_text, "examples": []}
    classes[UNCLASSIFIED] = {"count": 0, "rule": "no rule above holds", "examples": []}
    unclassified = []
    for r in rows:
        if (r["ours"] == "AC") == bool(r["lcb"]):
            continue
        name = classify(r)
        cls = classes[name]
        cls["count"] += 1
        if name == UNCLASSIFIED:
            unclassified.append(_example(r))
        elif len(cls["examples"]) < examples:
            cls["examples"].append(_example(r))
    classes[UNCLASSIFIED]["examples"] = unclassified
    return {
        "samples": len(rows),
        "problems": len({r["problem_id"] for r in rows}),
        "pass_at_1": {"ours": pass_at_1(rows, "ours"), "lcb": pass_at_1(rows, "lcb")},
        "confusion": confusion(rows),
        "disagreements": sum(c["count"] for c in classes.values()),
        "classes": {k: v for k, v in classes.items() if v["count"] or k == UNCLASSIFIED},
        "by_variant": by_variant(rows),
        "verdict_pairs": verdict_pairs(rows),
    }
