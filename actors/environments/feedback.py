"""The repair environment's feedback: a failed run on the visible tests, in words for the model.

    feedback_text(problem, run, chars)   # the user message after a failed turn
    no_program_text(language, reason)    # the one after a turn with no complete program
    cut(text, chars)                      # at most `chars` characters, head and tail kept

What a message holds, by the problem's kind (`problem` is the one the program ran on: its
`tests` are the visible tests, so the failing test is `problem.tests[run.first_failed]`):
- every kind: the verdict in words with its code (`wrong answer (WA)`), which visible test
  failed (`test 2 of 3`), the judge's reason (`ProgramRun.message`), the program's stderr;
- `stdin`: the failing input, the expected output and the program's output;
- `functional`: the arguments (one JSON value per line), the expected return value, what the
  program printed (the returned value is in the judge's reason: "expected X, got Y");
- `assert`: the failing check's code (an `assert` line or script);
- a compile error (CE) or a limit hit before any test (first_failed None): the reason and
  stderr only.
Each part is cut to `environment.feedback_chars` characters (`cut`: head and tail kept, the
cut marked in the text, the marker counted in the limit). The judge already keeps at most 300
characters of stdout (the head) and of stderr (the tail) and 500 of the reason
(sandbox/grade.py), so those parts are never longer than that. A message ends by asking for the
whole corrected program in one fence of the problem's language. Nothing here reads a test the
program was not run on: the hidden tests never reach this module.
"""

from __future__ import annotations

from microcoder.data.problem import Problem
from microcoder.protocol import ProgramRun
from microcoder.sandbox.extract import FENCES

VERDICT_WORDS = {
    "AC": "accepted",
    "WA": "wrong answer",
    "TLE": "time limit exceeded",
    "MLE": "memory limit exceeded",
    "OLE": "output limit exceeded (it printed far more than expected)",
    "RE": "runtime error",
    "CE": "compilation error",
    "SE": "judge fault",
}
"""Each sandbox/verdict.py verdict a run can have, in words."""
CUT_MARK = "\n[... {} chars cut]\n"
"""What replaces the middle of a part longer than the limit."""


def cut(text: str, chars: int) -> str:
    """`text` if it has at most `chars` characters, else its head and tail around CUT_MARK
    (naming how many characters were cut), `chars` characters in all (marker included; at least
    the marker when `chars` is smaller than it)."""
    if len(text) <= chars:
        return text
    keep = max(chars - len(CUT_MARK.format(len(text))), 0)
    head = (keep + 1) // 2
    tail = keep - head
    return (
        text[:head] + CUT_MARK.format(len(text) - keep) + (text[len(text) - tail :] if tail else "")
    )


def fence(language: str) -> str:
    """The fence tag the model is asked for (```python, ```cpp, ```java)."""
    return FENCES[language][0]


def _block(title: str, text: str, chars: int) -> str:
    body = cut(text, chars)
    return f"{title}:\n```\n{body}{'' if body.endswith(chr(10)) else chr(10)}```"


def _ask(language: str) -> str:
    return (
        "Fix the program and answer with the whole corrected program in one "
        f"```{fence(language)} block."
    )


def feedback_text(problem: Problem, run: ProgramRun, chars: int) -> str:
    """The user message after a turn whose program failed the visible tests (`problem.tests`;
    `run`: the failed run on them); parts cut to `chars` (see the module doc)."""
    words = VERDICT_WORDS.get(run.verdict, run.verdict)
    total = len(problem.tests)
    i = run.first_failed
    if run.verdict == "CE" or i is None or not 0 <= i < total:
        head = f"Your program failed before running the {total} visible test(s): {words} ({run.verdict})."
        parts = [head]
    else:
        head = f"Your program failed visible test {i + 1} of {total}: {words} ({run.verdict})."
        test = problem.tests[i]
        parts = [head, *_test_parts(problem, test, run, chars)]
    if run.message.strip():
        parts.append(_block("Judge's reason", run.message, chars))
    if run.stderr.strip():
        parts.append(_block("Stderr", run.stderr, chars))
    parts.append(_ask(problem.language))
    return "\n\n".join(parts)


def _test_parts(problem: Problem, test: dict[str, str], run: ProgramRun, chars: int) -> list[str]:
    if problem.kind == "assert":
        return [_block("The failing check", test["code"], chars)]
    if problem.kind == "functional":
        parts = [
            _block("Arguments (one JSON value per line)", test["input"], chars),
            _block("Expected return value", test["output"], chars),
        ]
        if run.stdout.strip():
            parts.append(_block("Your program printed", run.stdout, chars))
        return parts
    return [
        _block("Input", test["input"], chars),
        _block("Expected output", test["output"], chars),
        _block("Your output", run.stdout, chars),
    ]


def no_program_text(language: str, reason: str) -> str:
    """The user message after a turn with no complete program (sandbox/extract.py `no_code` or
    `unfinished`; `reason` is its `Extraction.reason`)."""
    return (
        f"No complete program was found in your answer ({reason}). Put the whole program in "
        f"one ```{fence(language)} block."
    )
