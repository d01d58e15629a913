import math

import pytest

from microcoder.data.formats.literals import LiteralError, parse_literal, parse_named_args


def test_json_and_python_spellings_agree():
    assert parse_literal("[true, null, 'a', -1.5]") == parse_literal('[True, None, "a", -1.5]')


def test_infinity_is_a_float():
    assert parse_literal("-inf") == -math.inf


@pytest.mark.parametrize("text", ["__import__('os')", "a.b", "x", "1 + 2", "[f()]", "{1: 2}"])
def test_anything_but_literals_is_refused(text):
    with pytest.raises(LiteralError):
        parse_literal(text)


def test_named_args_keep_order_and_nesting():
    assert parse_named_args('s = "a, b", m = [[1, 2], [3]]') == [
        ("s", "a, b"),
        ("m", [[1, 2], [3]]),
    ]


def test_positional_args_are_refused():
    with pytest.raises(LiteralError):
        parse_named_args("1, b = 2")
