"""The built-in prompt templates (`default`, `lcb`) and the per-kind prompt fields they fill.

A template maps each problem kind to a `KindTemplate`: a system prompt and a function from the
kind's `PromptFields` to the user message. The fields come from one function per kind,
registered once in `FIELDS`; user template files (data/prompting/template_file.py) fill the same fields
with `str.format`.

`default` (our own wording):
- stdin: the user message is the statement itself and the system prompt is
  `STDIN_SYSTEM`, byte for byte the rendering the tiny model is warm-started with (do not change
  it: learner/warmstart/build.py keys its cache on it).
- functional: statement, an instruction naming `fn_name` and how the judge calls it (no stdin),
  and the starter code in a ```python block.
- assert (HumanEval style): the statement and the signature to complete, shown once.
- answer (exact answers, not code): the statement itself, and `ANSWER_SYSTEM` asks for the
  final answer in `\\boxed{}` (what sandbox/rewards/answer.py reads first).

Languages: the templates are written for Python. A C++ or Java problem (Problem.language) gets
the same wording with the language named instead (`in_language`: "Python" becomes "C++" or
"Java", a ```python fence ```cpp or ```java, and Java's system prompt says where `main` goes),
so a Python problem's prompt is unchanged byte for byte. User template files pass through the
same substitution.

`lcb`: LiveCodeBench's own wording for its code-generation scenario, written from its documented
prompt format (LiveCodeBench/LiveCodeBench, `lcb_runner/prompts/code_generation.py`: the
generic chat format, `PromptConstants.SYSTEM_MESSAGE_GENERIC` and
`get_generic_question_template_answer`), so pass rates are comparable with its leaderboard.
LiveCodeBench has no assert kind and always gives functional problems starter code; for those
cases the text below says what we add. It has no `answer` kind either: `lcb` renders it as
`default` does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from microcoder.data.problem import Problem


@dataclass(frozen=True)
class PromptFields:
    """What a template may show of a problem (the placeholders of a user template file)."""

    statement: str
    """The problem statement; empty when it is only the starter code (HumanEval's prompt)."""
    starter_code: str
    """Code to complete; empty when there is none or the statement already shows it."""
    fn_name: str
    """The entry point the judge calls (functional) or the tests call (assert); may be empty."""


@dataclass(frozen=True)
class KindTemplate:
    """The wording of one problem kind: a system prompt and the user message."""

    system: str
    """System message; empty = no system message."""
    user: Callable[[PromptFields], str]
    """The user message of a problem, from its fields."""


Template = Mapping[str, KindTemplate]
"""kind -> wording; every kind in problem.KINDS."""


def _plain_fields(p: Problem) -> PromptFields:
    return PromptFields(p.prompt, p.starter_code, p.fn_name)


def _code_fields(p: Problem) -> PromptFields:
    """Show the signature once: HumanEval's statement *is* its starter code (keep the code);
    rllm's LeetCode statements already contain their starter code (keep the statement)."""
    statement = p.prompt
    starter = p.starter_code
    if starter.strip() and statement.strip() == starter.strip():
        statement = ""
    elif starter.strip() and starter.strip() in statement:
        starter = ""
    return PromptFields(statement, starter, p.fn_name)


FIELDS: dict[str, Callable[[Problem], PromptFields]] = {
    "stdin": _plain_fields,
    "functional": _code_fields,
    "assert": _code_fields,
    "answer": _plain_fields,
}
"""The one field extractor per problem kind."""


def _join(*parts: str) -> str:
    return "\n\n".join(p.rstrip() for p in parts if p.strip())


def _block(code: str) -> str:
    return f"```python\n{code.rstrip()}\n```" if code.strip() else ""


def _in_class(f: PromptFields) -> bool:
    return "class Solution" in (f.starter_code or f.statement)


def _callee(f: PromptFields) -> str:
    return f"Solution().{f.fn_name}" if _in_class(f) else f.fn_name


# --- default -------------------------------------------------------------------------------

STDIN_SYSTEM = (
    "Write a Python program that solves the problem. Reply with one ```python code block."
)
"""The stdin system prompt; must stay byte-identical (the tiny model's warm start uses it)."""
FUNCTIONAL_SYSTEM = (
    "Complete the given Python code so that it solves the problem. Reply with one ```python "
    "code block holding the whole completed code, with the imports it needs."
)
ASSERT_SYSTEM = (
    "Complete the given Python function so that it passes the hidden tests. Reply with one "
    "```python code block holding the whole function, with the imports it needs."
)

ANSWER_SYSTEM = (
    "Solve the problem. End your reply with the final answer alone in \\boxed{}, e.g. \\boxed{42}."
)


def _default_functional(f: PromptFields) -> str:
    calls = (
        f"The judge calls `{_callee(f)}` with each test's arguments and checks the value it "
        "returns; nothing is read from stdin and nothing needs to be printed."
    )
    if f.starter_code:
        ask = f"Complete the following code: implement `{f.fn_name}`. {calls}"
    else:
        ask = (
            f"Write a method `{f.fn_name}` of `class Solution` (or a function `{f.fn_name}`). "
            f"{calls}"
        )
    return _join(f.statement, ask, _block(f.starter_code))


def _default_assert(f: PromptFields) -> str:
    if f.fn_name:
        name = (
            f"the method `{f.fn_name}` of `class Solution`"
            if _in_class(f)
            else f"the function `{f.fn_name}`"
        )
        if f.starter_code:
            where = " below"
        elif f.fn_name in f.statement:
            where = " (the statement shows its signature)"
        else:
            where = ""
        ask = f"Complete {name}{where}. The tests call it directly and assert on what it returns."
    else:
        ask = "Write the Python code the statement asks for; the tests run after it and assert."
    return _join(f.statement, ask, _block(f.starter_code))


DEFAULT: Template = {
    "stdin": KindTemplate(STDIN_SYSTEM, lambda f: f.statement),
    "functional": KindTemplate(FUNCTIONAL_SYSTEM, _default_functional),
    "assert": KindTemplate(ASSERT_SYSTEM, _default_assert),
    "answer": KindTemplate(ANSWER_SYSTEM, lambda f: f.statement),
}


# --- lcb (LiveCodeBench's wording) -------------------------------------------------------

LCB_SYSTEM = (
    "You are an expert Python programmer. You will be given a question (problem specification) "
    "and will generate a correct Python program that matches the specification and passes all "
    "tests."
)
LCB_WITH_STARTER = (
    "You will use the following starter code to write the solution to the problem and enclose "
    "your code within delimiters."
)
LCB_WITHOUT_STARTER = (
    "Read the inputs from stdin solve the problem and write the answer to stdout (do not "
    "directly test on the sample inputs). Enclose your code within delimiters as follows. "
    "Ensure that when the python program runs, it reads the inputs, runs the algorithm and "
    "writes output to STDOUT."
)
LCB_PLACEHOLDER = "# YOUR CODE HERE"


def _lcb(question: str, fmt: str, code: str) -> str:
    return (
        f"### Question:\n{question}\n\n"
        f"### Format: {fmt}\n```python\n{code}\n```\n\n"
        "### Answer: (use the provided format with backticks)\n\n"
    )


def _lcb_stdin(f: PromptFields) -> str:
    """LiveCodeBench's branch on `starter_code`, exactly."""
    if f.starter_code:
        return _lcb(f.statement, LCB_WITH_STARTER, f.starter_code)
    return _lcb(f.statement, LCB_WITHOUT_STARTER, LCB_PLACEHOLDER)


def _lcb_functional(f: PromptFields) -> str:
    """LiveCodeBench's starter-code branch; without starter code (never in LiveCodeBench) the
    placeholder names the function instead of asking for stdin."""
    code = f.starter_code or f"{LCB_PLACEHOLDER} (define `{f.fn_name}`)"
    return _lcb(f.statement, LCB_WITH_STARTER, code)


def _lcb_assert(f: PromptFields) -> str:
    """Not a LiveCodeBench kind: the starter-code branch; a HumanEval problem (its statement is
    its starter code) gets a one-line question naming the function."""
    question = f.statement or (
        f"Complete the Python function `{f.fn_name}` in the starter code below; its docstring "
        "specifies it."
    )
    if f.starter_code:
        return _lcb(question, LCB_WITH_STARTER, f.starter_code)
    return _lcb(question, "Enclose your code within delimiters as follows.", LCB_PLACEHOLDER)


LCB: Template = {
    "stdin": KindTemplate(LCB_SYSTEM, _lcb_stdin),
    "functional": KindTemplate(LCB_SYSTEM, _lcb_functional),
    "assert": KindTemplate(LCB_SYSTEM, _lcb_assert),
    "answer": DEFAULT["answer"],
}

BUILTIN: dict[str, Template] = {"default": DEFAULT, "lcb": LCB}
"""Templates by name (`prompt.template`)."""


LANGUAGE_NAMES = {"python": ("Python", "python"), "cpp": ("C++", "cpp"), "java": ("Java", "java")}
"""Problem.language -> (its name in prose, its code fence)."""
JAVA_MAIN = " Put `public static void main` in a public class named Main."
"""Added to a Java problem's system prompt: the class the judge runs (sandbox/languages.py)."""


def in_language(text: str, language: str, system: bool = False) -> str:
    """`text` (a rendered system or user message) with Python named as `language` instead."""
    if language == "python":
        return text
    name, fence = LANGUAGE_NAMES[language]
    text = text.replace("```python", f"```{fence}").replace("python program", f"{name} program")
    text = text.replace("Python", name)
    return text + JAVA_MAIN if system and language == "java" and text else text
