from microcoder.data.formats.loaders import load_problems


def test_stdin_row_gets_public_then_private_tests(fixture_path):
    p = load_problems(fixture_path("lcb.jsonl"), strict=False).problems[0]
    assert p.kind == "stdin" and p.platform == "atcoder" and p.difficulty == "easy"
    assert p.date.startswith("2024-01-01")
    assert p.tests == [{"input": "1 2\n", "output": "3\n"}, {"input": "5 5\n", "output": "10\n"}]


def test_func_name_in_metadata_makes_a_functional_problem(fixture_path):
    p = load_problems(fixture_path("lcb.jsonl"), strict=False).problems[1]
    assert (p.kind, p.fn_name) == ("functional", "twice")
    assert p.starter_code.startswith("class Solution") and len(p.tests) == 2


def test_missing_statement_is_rejected_by_field(fixture_path):
    rejects = load_problems(fixture_path("lcb.jsonl"), strict=False).rejects
    assert (rejects[0].line, rejects[0].field) == (3, "question_content")
