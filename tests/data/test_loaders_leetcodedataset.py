import json

from microcoder.data.formats.loaders import load_problems


def _load(fixture_path):
    return load_problems(fixture_path("leetcodedataset.jsonl"), strict=False)


def test_named_args_become_json_lines_in_signature_order(fixture_path):
    p = _load(fixture_path).problems[0]
    assert (p.kind, p.fn_name) == ("functional", "pick")
    assert p.tests[0] == {"input": "[true, false]\n1\nnull", "output": "false"}
    assert [json.loads(line) for line in p.tests[1]["input"].split("\n")] == [[True], 0, -3]


def test_recorded_errors_are_dropped_and_counted(fixture_path):
    result = _load(fixture_path)
    assert len(result.problems[0].tests) == 3
    assert result.dropped_tests == {"expected output is a recorded error/timeout": 1}


def test_str_returns_keep_the_raw_text(fixture_path):
    p = _load(fixture_path).problems[1]
    assert [t["output"] for t in p.tests] == ['"123"', '""']


def test_tree_problems_become_assert_tests_with_the_prelude(fixture_path):
    p = _load(fixture_path).problems[2]
    assert (p.kind, len(p.tests)) == ("assert", 2)
    assert "class TreeNode" in p.prelude
    assert p.tests[0]["code"].startswith("candidate = Solution().rootVal\nassert")


def test_mismatched_argument_names_reject_the_row(fixture_path):
    rejects = _load(fixture_path).rejects
    assert (rejects[0].line, rejects[0].field) == (4, "input_output[0].input")


def test_code_in_inputs_is_never_evaluated_and_the_row_rejected(fixture_path):
    rejects = _load(fixture_path).rejects
    assert (rejects[1].line, rejects[1].field) == (5, "input_output")
