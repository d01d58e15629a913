"""Decontamination against eval sets on small planted cases (data/corpus/decontam.py)."""

from __future__ import annotations

from microcoder.data.corpus.decontam import canonical_inputs, contaminated
from microcoder.data.problem import Problem

EVAL_STATEMENT = (
    "You are given a 0-indexed integer array nums and an integer k. A subarray is called "
    "balanced if the number of even elements in it equals the number of odd elements, and its "
    "sum is divisible by k. Return the number of balanced subarrays of nums whose length is at "
    "least two, modulo one billion and seven."
)
COPIED = (
    "Please solve the programming task below using a self-contained code snippet in a markdown "
    "code block.\n\nYou are given an integer array arr and an integer m. A subarray is called "
    "balanced if the number of even elements in it equals the number of odd elements, and its "
    "sum is divisible by m. Return the number of balanced subarrays of arr whose length is at "
    "least two, modulo one billion and seven.\nPlease complete the following python code "
    "precisely:\n```python\nclass Solution:\n    def count(self, arr, m):\n```"
)
CLEAN = (
    "A robot starts at the origin of an infinite grid and follows a string of moves. Each "
    "character is one of U, D, L or R. Return the number of distinct cells the robot visits, "
    "counting the origin, after performing every move exactly once in the given order."
)
DEFINITION = (
    "A subsequence is an array that can be derived from another array by deleting some or no "
    "elements without changing the order of the remaining elements."
)
SAMPLE = "5 3\n1 4 1 5 9\n2 6 5 3 5\n8 9 7 9 3\n2 3 8 4 6\n2 6 4 3 3\n8 3 2 7 9"


def _stdin(pid: str, prompt: str, inputs: list[str]) -> Problem:
    return Problem(
        id=pid, kind="stdin", prompt=prompt, tests=[{"input": x, "output": "0"} for x in inputs]
    )


def _functional(pid: str, prompt: str, inputs: list[str]) -> Problem:
    tests = [{"input": x, "output": "0"} for x in inputs]
    return Problem(id=pid, kind="functional", prompt=prompt, tests=tests, fn_name="count")


EVALS = [
    _functional("eval/balanced", EVAL_STATEMENT, ["[1,2,3,4]\n2"]),
    _stdin("eval/grid", "Count the paths of a grid whose cells have distinct numbers.", [SAMPLE]),
]


def test_a_copied_statement_is_contaminated_by_ngram():
    train = [_stdin("t0", COPIED, ["1 2"])]
    (hit,) = contaminated(train, EVALS)
    assert (hit.index, hit.eval_id, hit.why) == (0, "eval/balanced", "ngram")
    assert len(hit.detail.split()) == 13


def test_identical_test_inputs_with_whitespace_changes_are_contamination():
    sample = "\n".join("  ".join(line.split()) + "  " for line in SAMPLE.splitlines())
    train = [_stdin("t0", CLEAN, ["3", sample + "\n"])]
    (hit,) = contaminated(train, EVALS)
    assert (hit.index, hit.eval_id, hit.why) == (0, "eval/grid", "test_input")
    assert hit.detail == " ".join(SAMPLE.split())[:60]


def test_a_clean_row_is_not_contaminated():
    assert contaminated([_stdin("t0", CLEAN, ["7 7 7"])], EVALS) == []


def test_short_shared_inputs_are_not_evidence():
    train = [_functional("t0", CLEAN, ["[1,2,3,4]\n2", "[1]\n1"])]
    assert contaminated(train, EVALS) == []


def test_a_shared_definition_alone_is_not_contamination():
    ev = [_stdin("e", f"{DEFINITION} {EVAL_STATEMENT}", ["1"])]
    train = [_stdin("t", f"{DEFINITION} {CLEAN}", ["2"])]
    assert contaminated(train, ev) == []


def test_assert_and_functional_inputs_have_the_same_canonical_form():
    code = "candidate = Solution().count\nassert candidate(nums = [1, 2, 3], k = 2) == 4\n"
    as_assert = Problem(id="a", kind="assert", prompt="", tests=[{"code": code}])
    as_functional = _functional("f", "", ["[1,2,3]\n2"])
    assert canonical_inputs(as_assert) == canonical_inputs(as_functional) == ["[1,2,3]\n2"]


def test_contaminated_rows_are_reported_in_training_order_one_each():
    train = [
        _stdin("t0", CLEAN, ["1"]),
        _stdin("t1", COPIED, [SAMPLE]),
        _stdin("t2", CLEAN, [SAMPLE]),
    ]
    hits = contaminated(train, EVALS)
    assert [(h.index, h.why) for h in hits] == [(1, "ngram"), (2, "test_input")]


def test_rerunning_on_the_decontaminated_rows_finds_nothing():
    train = [_stdin("t0", CLEAN, ["1"]), _stdin("t1", COPIED, ["2"]), _stdin("t2", CLEAN, [SAMPLE])]
    removed = {h.index for h in contaminated(train, EVALS)}
    kept = [p for i, p in enumerate(train) if i not in removed]
    assert len(kept) == 1 and contaminated(kept, EVALS) == []
