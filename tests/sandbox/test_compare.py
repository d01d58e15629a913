"""Output comparison: what a real judge accepts, and nothing more."""

from __future__ import annotations

import pytest

from microcoder.sandbox.compare import compare_output, compare_value

ACCEPT = [
    ("exact", "3\n", "3\n"),
    ("trailing whitespace and CRLF", "1 2\n3\n", "1 2   \r\n3\r\n\n\n"),
    ("missing final newline", "YES\n", "YES"),
    ("float within 1e-6 absolute", "0.333333333\n", "0.3333333"),
    ("float within 1e-6 relative", "123456789.0\n", "123456789.1"),
    ("float written in another format", "2.5\n", "2.500000000"),
    ("integer for a whole float answer", "2.0\n", "2"),
    ("whole float answer with tolerance", "1.5 2.0\n", "1.5 1.9999999999"),
    ("exponent form of a float answer", "0.000001\n", "1e-6"),
    ("integer spelling of a float-formatted answer", "1e+18\n", "1000000000000000000"),
    ("a non-canonical expected integer, same spelling", "007\n", "007"),
    ("big integer exact", "123456789012345678901234567890\n", "123456789012345678901234567890"),
    ("extra spaces between tokens", "1 2 3\n", " 1  2\t3 "),
]
REJECT = [
    ("YES vs NO", "YES\n", "NO\n"),
    ("case change", "Yes\n", "YES\n"),
    ("reordered lines", "1\n2\n", "2\n1\n"),
    ("missing line", "1\n2\n", "1\n"),
    ("extra debug line", "3\n", "debug: a=1\n3\n"),
    ("float off by 1e-3", "0.5\n", "0.501"),
    ("big integer off by one", "100000000000000000001\n", "100000000000000000000"),
    ("integer vs close float", "7\n", "7.0000001"),
    ("1e+18 for an integer", "1000000000000000000\n", "1e+18"),
    ("integer printed with .0", "1000000000000000000\n", "1000000000000000000.0"),
    ("2.0 for 2", "2\n", "2.0"),
    ("exponent form of an integer", "2\n", "2e0"),
    ("whole value of a float output printed as float", "1.5 2\n", "1.5 2.0"),
    ("leading plus", "5\n", "+5"),
    ("leading zeros", "7\n", "007"),
    ("minus zero", "0\n", "-0"),
    ("integer for a non-canonical expected integer", "007\n", "7"),
    ("tokens merged", "1 2\n", "12\n"),
    ("tokens split across lines", "1 2\n", "1\n2\n"),
    ("empty output", "5\n", ""),
]


@pytest.mark.parametrize("name,expected,actual", ACCEPT, ids=[a[0] for a in ACCEPT])
def test_accepts_what_a_real_judge_accepts(name, expected, actual):
    assert compare_output(expected, actual)[0]


@pytest.mark.parametrize("name,expected,actual", REJECT, ids=[r[0] for r in REJECT])
def test_rejects_wrong_but_close_outputs(name, expected, actual):
    ok, why = compare_output(expected, actual)
    assert not ok and why


def test_case_insensitive_yesno_only_when_declared():
    assert compare_output("YES\nNO\n", "yes\nNo\n", "case-insensitive-yesno")[0]
    assert not compare_output("YES\n", "yes\n")[0]
    assert not compare_output("abc\n", "ABC\n", "case-insensitive-yesno")[0]


def test_unordered_tokens_mode_accepts_permutations_only():
    assert compare_output("1 2 3\n", "3 1\n2\n", "unordered-tokens")[0]
    assert not compare_output("1 2 3\n", "1 2 4\n", "unordered-tokens")[0]


def test_unordered_tokens_mode_compares_integers_by_their_spelling():
    assert not compare_output("1 2 3\n", "3 01 2\n", "unordered-tokens")[0]
    assert not compare_output("1 2 3\n", "3 1.0 2\n", "unordered-tokens")[0]


def test_any_of_mode_accepts_each_listed_answer():
    expected = '["1 2\\n", "2 1\\n"]'
    assert compare_output(expected, "2 1\n", "any-of")[0]
    assert not compare_output(expected, "1 1\n", "any-of")[0]


@pytest.mark.parametrize(
    "expected,actual,ok",
    [
        ("[0, 1]", "[0, 1]", True),
        ("[0, 1]", "[0,1]", True),  # a tuple returned as (0, 1) is encoded as a list
        ("0.5", "0.5000000001", True),
        ("0.5", "0.501", False),
        ("true", "1", False),
        ("12345678901234567890", "12345678901234567891", False),
        ('"abc"', '"ABC"', False),
        ('{"a": [1, 2]}', '{"a": [1, 2]}', True),
        ("[1, 2]", "[2, 1]", False),
        ("1000000000000000000", "1e+18", False),  # a float return for an int answer
        ("2", "2.0", False),
        ("[1, 2]", "[1.0, 2]", False),
        ("2.0", "2", True),  # an int return for a float answer, as on the stdin side
        ("2.5", "2.5000000001", True),
        ("0.5", "1" + "0" * 400, False),  # an int too large for a float
        ("1", "true", False),
    ],
)
def test_functional_values_compare_as_json(expected, actual, ok):
    assert compare_value(expected, actual)[0] is ok
