"""Problem.language: validated, kept by the loaders and the store, named by the prompts, and
used by extraction to pick the language's fence."""

from __future__ import annotations

import json
import sqlite3

import pytest

from microcoder.data.config import DataSourceConfig, PromptConfig
from microcoder.data.formats.loaders import detect_format, load_problems
from microcoder.data.problem import ProblemFormatError, validate_problem
from microcoder.data.prompting.render import render_messages
from microcoder.data.prompting.templates import STDIN_SYSTEM
from microcoder.data.store import ProblemStore, build_store
from microcoder.sandbox import extract_code

TESTS = [{"input": "1 2\n", "output": "3\n"}]


def row(**extra) -> dict:
    return {"id": "a", "kind": "stdin", "prompt": "Add.", "tests": TESTS, **extra}


def test_language_defaults_to_python_and_is_validated():
    assert validate_problem(row()).language == "python"
    assert validate_problem(row(language="cpp")).language == "cpp"
    with pytest.raises(ProblemFormatError, match="'rust' is not one of python, cpp, java"):
        validate_problem(row(language="rust"))
    with pytest.raises(ProblemFormatError, match="java problems must be stdin"):
        validate_problem(row(kind="functional", fn_name="f", language="java"))


CODECONTESTS = {
    "name": "1548_A. Add",
    "description": "Add two numbers.",
    "public_tests": {"input": ["1 2\n"], "output": ["3\n"]},
    "private_tests": {"input": ["5 5\n"], "output": ["10\n"]},
    "generated_tests": {"input": [], "output": []},
    "solutions": {
        "language": [1, 2, 4, 2],
        "solution": ["print 3", "int main(){}", "class Main {}", "// second c++"],
    },
    "time_limit": {"seconds": 2, "nanos": 500000000},
    "memory_limit_bytes": 256 << 20,
    "difficulty": 7,
}


def test_codecontests_keeps_the_solutions_language(tmp_path):
    f = tmp_path / "cc.jsonl"
    with_python = dict(
        CODECONTESTS, name="py", solutions={"language": [3, 2], "solution": ["x=1", "y"]}
    )
    chosen = dict(CODECONTESTS, name="java-only", language="java")
    f.write_text("\n".join(json.dumps(r) for r in (CODECONTESTS, with_python, chosen)) + "\n")
    assert detect_format(CODECONTESTS) == "codecontests"
    cpp, py, java = load_problems(f)
    assert (cpp.language, cpp.solutions) == ("cpp", ["int main(){}", "// second c++"])
    assert len(cpp.tests) == 2 and cpp.time_limit_s == 2.5 and cpp.memory_mb == 256
    assert (py.language, py.solutions) == ("python", ["x=1"])  # Python 3 first; Python 2 never
    assert (java.language, java.solutions) == ("java", ["class Main {}"])


def test_apps_rows_keep_a_language_field(tmp_path):
    f = tmp_path / "taco.jsonl"
    io = json.dumps({"inputs": ["1 2\n"], "outputs": ["3\n"]})
    rows = [{"question": "q", "input_output": io, "language": lang} for lang in ("C++", None)]
    f.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert [p.language for p in load_problems(f, format="apps")] == ["cpp", "python"]


def test_the_store_keeps_the_language_and_records_the_languages(tmp_path):
    f = tmp_path / "p.jsonl"
    f.write_text(json.dumps(row(id="c", language="cpp")) + "\n" + json.dumps(row(id="p")) + "\n")
    path, _ = build_store(
        [DataSourceConfig(path=str(f))], 0, 0.0, tmp_path / "s", log=lambda _: None
    )
    store = ProblemStore(path)
    assert store.get("c").language == "cpp" and store.get("p").language == "python"
    assert store.languages() == ["cpp", "python"]
    store.close()
    # a store written before languages were recorded: Python only
    con = sqlite3.connect(path)
    con.execute("DELETE FROM meta WHERE name = 'languages'")
    con.commit()
    con.close()
    assert ProblemStore(path).languages() == ["python"]


def test_prompts_name_the_language_and_keep_python_byte_identical():
    cfg = PromptConfig()
    python = render_messages(validate_problem(row()), cfg)
    assert python[0]["content"] == STDIN_SYSTEM
    cpp = render_messages(validate_problem(row(language="cpp")), cfg)
    assert (
        cpp[0]["content"]
        == "Write a C++ program that solves the problem. Reply with one ```cpp code block."
    )
    java = render_messages(validate_problem(row(language="java")), cfg)
    assert "Java program" in java[0]["content"] and "```java" in java[0]["content"]
    assert "public class named Main" in java[0]["content"]
    lcb = render_messages(validate_problem(row(language="cpp")), PromptConfig(template="lcb"))
    assert "C++ programmer" in lcb[0]["content"] and "```cpp" in lcb[1]["content"]
    assert "Python" not in lcb[0]["content"] + lcb[1]["content"]


@pytest.mark.parametrize(
    ("language", "fence"), [("cpp", "cpp"), ("cpp", "c++"), ("java", "java"), ("python", "py")]
)
def test_extraction_takes_the_fence_of_the_problems_language(language, fence):
    text = f"```{fence}\nTHE ANSWER\n```\nand a note\n```text\nnot code\n```\n"
    assert extract_code(text, language=language) == "THE ANSWER\n"


def test_extraction_prefers_the_language_over_a_later_python_block():
    text = "```cpp\nint main(){}\n```\nin Python:\n```python\nprint(1)\n```\n"
    assert extract_code(text, language="cpp") == "int main(){}\n"
    assert extract_code(text) == "print(1)\n"
