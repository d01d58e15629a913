from microcoder.data.formats.leetcode_prelude import LEETCODE_PRELUDE
from microcoder.data.formats.loaders import load_problems


def test_apps_stdin_joins_line_lists(fixture_path):
    p = load_problems(fixture_path("apps.jsonl"), strict=False).problems[0]
    assert p.kind == "stdin" and p.meta["solution"].startswith("print(")
    assert p.tests[1] == {"input": "3 4\nx\n", "output": "7\n"}


def test_apps_fn_name_unwraps_one_element_outputs(fixture_path):
    p = load_problems(fixture_path("apps.jsonl"), strict=False).problems[1]
    assert (p.kind, p.fn_name) == ("functional", "pair")
    assert p.tests[0] == {"input": '1\n"a"', "output": '[1, "a"]'}
    assert (p.time_limit_s, p.memory_mb, p.source) == (2.5, 256, "codewars")


def test_apps_bad_rows_are_named(fixture_path):
    rejects = load_problems(fixture_path("apps.jsonl"), strict=False).rejects
    assert [(r.line, r.field) for r in rejects] == [
        (3, "input_output.outputs"),
        (4, "input_output"),
    ]


def test_rllm_reads_all_three_test_shapes(fixture_path):
    result = load_problems(fixture_path("rllm.json"), strict=False)
    assert [(p.id, p.kind, len(p.tests)) for p in result.problems] == [
        ("rllm/1", "stdin", 1),
        ("rllm/2", "stdin", 2),
        ("rllm/3", "assert", 2),
    ]
    assert [(r.line, r.field) for r in result.rejects] == [(4, "tests[0]")]


def test_rllm_functional_tests_pass_the_reference_with_our_prelude(fixture_path):
    p = load_problems(fixture_path("rllm.json"), strict=False).problems[2]
    assert p.prelude == LEETCODE_PRELUDE and p.fn_name == "rev"
    for t in p.tests:
        exec(p.prelude + "\n" + p.meta["solution"] + "\n" + t["code"], {})
