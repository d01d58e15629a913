"""`environment.kind = "repair"`: the model repairs its program from the visible tests' verdict.

Turn 1 is the single-turn prompt. After each turn the program (extracted as the executor
extracts it: sandbox/extract.py under the run's `prompt.reasoning` and the problem's language)
runs on the problem's visible tests only, in the executor pool (`EnvContext.sandbox`):
- it passes them: the trajectory ends (`passed` True);
- it fails them and turns remain (`environment.max_turns`): the feedback (feedback.py: the
  verdict, the failing test's input and expected output, the program's output and stderr, each
  cut to `environment.feedback_chars`) is appended as a user message and the model answers
  again;
- the answer holds no complete program (no code, or a fence left open): the feedback says so;
- the last turn, or a judge fault (SE, a sandbox call past `environment.sandbox_timeout_s`):
  the trajectory ends there (a fault is never guessed at: no feedback is made up).
The reward is never the environment's: the executor judges the final turn on ALL the
problem's tests, as for a single turn (`EnvStep.reward` None).

Visible tests (`visible_tests`): the problem's `public_tests` (the statement's examples, data/
problem.py) when it has them, else its first `environment.visible_tests` tests, but never all
of them: a problem with one test (and no public tests) has none visible, and a problem with N
tests shows at most N - 1, so at least one judged test is never shown. With no visible test the
trajectory is one turn (`passed` None). Problems the sandbox does not run (`answer`) are one
turn too.

Metrics per turn (`Turn.metrics`): `visible_passed`, `visible_total` (tests run and passed),
`no_program` (1: nothing to run), `sandbox_error` (1: the run was an SE).
"""

from __future__ import annotations

from dataclasses import replace

from microcoder.actors.environments.base import Environment, Messages
from microcoder.actors.environments.feedback import feedback_text, no_program_text
from microcoder.data.problem import JUDGED_KINDS, Problem
from microcoder.protocol import EnvStep
from microcoder.sandbox.extract import extract


def visible_tests(problem: Problem, first: int) -> list[dict[str, str]]:
    """The tests the model may see run: `public_tests`, else the first `first` tests but never
    every test (see the module doc); [] when none may be shown."""
    if problem.public_tests:
        return list(problem.public_tests)
    return list(problem.tests[: min(first, len(problem.tests) - 1)])


class Repair(Environment):
    """Run each turn's program on the visible tests; on a failure, feed the verdict back."""

    problem: Problem | None = None
    visible: Problem | None = None
    """The problem with only its visible tests (what the sandbox runs); None: nothing to run."""

    def reset(self, problem: Problem) -> Messages:
        self.problem = problem
        shown = visible_tests(problem, self.context.config.visible_tests)
        self.visible = None
        if problem.kind in JUDGED_KINDS and shown:
            # a copy: the judge caches per-problem data in `meta`, which must not be shared
            self.visible = replace(problem, tests=shown, public_tests=[], solutions=[], meta={})
        messages = self.context.prompt_messages(problem)
        self._earlier = _assistant_turns(messages)  # a few-shot prompt's own answers
        return messages

    def step(self, messages: Messages, response: str) -> EnvStep:
        if self.problem is None:
            raise RuntimeError("Repair.step before reset(problem)")
        if self.visible is None:
            return EnvStep(done=True, metrics=_metrics(0, 0))
        turn = _assistant_turns(messages) - self._earlier + 1
        last = turn >= self.context.config.max_turns
        total = len(self.visible.tests)
        language = self.problem.language
        found = extract(response, self.context.reasoning, language=language)
        if found.code is None:
            metrics = _metrics(0, total, no_program=1)
            if last:
                return EnvStep(done=True, passed=False, metrics=metrics)
            text = no_program_text(language, found.reason)
            return EnvStep(done=False, passed=False, feedback=[_user(text)], metrics=metrics)
        run = self.context.sandbox.run(self.visible, found.code)
        if run.verdict == "SE":
            return EnvStep(done=True, metrics=_metrics(run.passed, total, sandbox_error=1))
        metrics = _metrics(run.passed, total)
        if run.verdict == "AC" or last:
            return EnvStep(done=True, passed=run.verdict == "AC", metrics=metrics)
        text = feedback_text(self.visible, run, self.context.config.feedback_chars)
        return EnvStep(done=False, passed=False, feedback=[_user(text)], metrics=metrics)


def _assistant_turns(messages: Messages) -> int:
    return sum(1 for m in messages if m.get("role") == "assistant")


def _user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def _metrics(passed: int, total: int, no_program: int = 0, sandbox_error: int = 0) -> dict:
    return {
        "visible_passed": float(passed),
        "visible_total": float(total),
        "no_program": float(no_program),
        "sandbox_error": float(sandbox_error),
    }
