"""bench peer: the variant generator and the comparison logic, on hand-made inputs (no LCB)."""

from __future__ import annotations

import ast

from microcoder.bench.peer import build_generations
from microcoder.bench.peer.compare import (
    UNCLASSIFIED,
    classify,
    compare,
    confusion,
    pass_at_1,
    verdict_pairs,
)
from microcoder.bench.peer.variants import VARIANTS, make_variant, variants_for
from microcoder.data.problem import Problem

REFERENCE = """\
class Solution:
    def countSmaller(self, nums: List[int], k: int) -> int:
        total = 0
        for i in range(len(nums)):
            if nums[i] < k:
                total += nums[i] // 2
        return total
"""


def _row(pid, idx, ours, lcb, variant="reference", message="", **meta) -> dict:
    return {
        "problem_id": pid,
        "sample_index": idx,
        "variant": variant,
        "ours": ours,
        "ours_message": message,
        "lcb": lcb,
        "lcb_meta": meta,
    }


def test_every_variant_applies_to_a_method_with_all_constructs():
    for name in VARIANTS:
        assert make_variant(REFERENCE, "countSmaller", name, "p", seed=0) is not None, name


def test_variants_are_deterministic_for_a_seed():
    first = variants_for(REFERENCE, "countSmaller", "p", list(VARIANTS), seed=3)
    again = variants_for(REFERENCE, "countSmaller", "p", list(VARIANTS), seed=3)
    assert first == again


def test_every_variant_but_the_syntax_error_parses_and_changes_the_ast():
    reference = ast.dump(ast.parse(REFERENCE))
    for name, code in variants_for(REFERENCE, "countSmaller", "p", list(VARIANTS), seed=0):
        if name == "syntax-error":
            continue
        assert ast.dump(ast.parse(code)) != reference, name


def test_syntax_error_variant_does_not_parse():
    code = make_variant(REFERENCE, "countSmaller", "syntax-error", "p", seed=0)
    try:
        ast.parse(code)
    except SyntaxError:
        return
    raise AssertionError("the syntax-error variant parsed")


def test_float_return_needs_an_int_method():
    ref = "class Solution:\n    def f(self, s: str) -> str:\n        return s[::-1]\n"
    assert make_variant(ref, "f", "float-return", "p", seed=0) is None


def test_a_variant_equal_to_the_reference_is_dropped():
    ref = "class Solution:\n    def f(self, a: int) -> int:\n        return a\n"
    assert make_variant(ref, "f", "range-minus-one", "p", seed=0) is None
    assert [n for n, _ in variants_for(ref, "f", "p", ["range-minus-one", "wrong-name"], 0)] == [
        "wrong-name"
    ]


def test_generations_start_with_the_reference_and_number_samples_from_zero():
    p = Problem(
        id="p",
        kind="functional",
        prompt="",
        fn_name="countSmaller",
        tests=[{"input": "[1]\n2", "output": "0"}],
        meta={"solution": REFERENCE},
    )
    rows = build_generations([p], ["wrong-name", "infinite-loop"], seed=0, slow_fraction=0.0)
    assert [r["sample_index"] for r in rows] == [0, 1]
    assert rows[0]["code"] == REFERENCE and rows[0]["variant"] == "reference"
    assert rows[1]["variant"] == "wrong-name"


def test_confusion_counts_each_cell():
    rows = [
        _row("a", 0, "AC", True),
        _row("a", 1, "WA", False),
        _row("a", 2, "WA", False),
        _row("b", 0, "AC", False),
        _row("b", 1, "TLE", True),
        _row("b", 2, "WA", True),
    ]
    assert confusion(rows) == {"both_pass": 1, "both_fail": 2, "ours_only": 1, "lcb_only": 2}


def test_pass_at_1_is_per_problem_then_averaged():
    rows = [
        _row("a", 0, "AC", True),
        _row("a", 1, "WA", True),
        _row("a", 2, "WA", False),
        _row("a", 3, "WA", False),
        _row("b", 0, "AC", False),
    ]
    assert pass_at_1(rows, "ours") == (1 / 4 + 1) / 2
    assert pass_at_1(rows, "lcb") == (2 / 4 + 0) / 2


def test_float_for_int_is_read_from_our_message():
    row = _row("a", 1, "WA", True, "float-return", "expected [1, 3], got [1, 3.0]")
    assert classify(row) == "float for int: LCB accepts by =="


def test_float_for_int_with_a_cut_message_falls_back_on_the_variant():
    row = _row("a", 1, "WA", True, "true-division", "expected [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11")
    assert classify(row) == "float for int: LCB accepts by =="


def test_bool_for_int_is_its_own_class():
    assert classify(_row("a", 1, "WA", True, "x", "expected 1, got true")).startswith("bool")


def test_lcb_rejections_of_accepted_programs_are_classified_by_error_code():
    assert classify(_row("a", 0, "AC", False, error_code=-3)).startswith("LCB timeout")
    index_error = _row("a", 0, "AC", False, error_code=-5, error="IndexError('list index')")
    assert classify(index_error).startswith("LCB global timeout")
    close = _row("a", 0, "AC", False, error_code=-2, expected="0.3", output="0.30000000000000004")
    assert classify(close) == "LCB exact float compare"


def test_a_wrong_answer_no_rule_explains_is_unclassified_and_listed():
    rows = [
        _row("a", 0, "AC", False, error_code=-2, expected="3", output="4"),
        _row("a", 1, "TLE", True, "infinite-loop"),
    ]
    result = compare(rows)
    assert result["disagreements"] == 2
    assert result["classes"][UNCLASSIFIED]["count"] == 1
    assert result["classes"][UNCLASSIFIED]["examples"][0]["problem_id"] == "a"
    assert result["classes"]["ours TLE, LCB in time"]["count"] == 1


def test_agreements_are_not_classified():
    result = compare([_row("a", 0, "AC", True), _row("a", 1, "WA", False)])
    assert result["disagreements"] == 0
    assert list(result["classes"]) == [UNCLASSIFIED]


def test_verdict_pairs_count_our_verdict_against_lcb_error_code():
    rows = [
        _row("a", 0, "AC", True),
        _row("a", 1, "CE", False, error_code=-4),
        _row("a", 2, "RE", False, error_code=-4),
        _row("a", 3, "CE", False, error_code=-4),
    ]
    assert verdict_pairs(rows) == {"CE / -4": 2, "AC / AC": 1, "RE / -4": 1}
