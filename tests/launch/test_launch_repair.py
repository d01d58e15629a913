"""Multi-turn training end to end (issue 48): a 3-step tiny launch with environment.kind =
repair, max_turns = 2. The random-weight model's programs fail the visible tests, so its
trajectories get the feedback and a second turn: the second turn's prompt holds the first's
feedback and never a hidden test, and the rollout dump shows both turns.

Who makes what pass (the three parts were built side by side): the generator's trajectories
(actors/trajectory.py, h92) make responses longer than one turn's cap cross the buffer; the
repair environment and its sandbox (actors/environments/repair.py, executor_sandbox.py, h91)
run turn 1 on the visible tests; the dump's turns and feedback (actors/rollouts.py, buffer/
codec.py, h93) are asserted in `test_the_dump_shows_both_turns_and_the_feedback_hides_the_hidden_tests`."""

from __future__ import annotations

import pytest
from launch_testing.batch import batched_launch
from launch_testing.launched import QUICK, SMALL_BATCH, assert_finished, rollout_rows, tiny_args

from microcoder.data.store import STORE_NAME, ProblemStore

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]  # the launch runs in the fixture

STEPS = 3
CAP = 16  # QUICK's generator.max_response_tokens: the cap of each turn
VISIBLE = 1  # environment.visible_tests (the default)
SETTINGS = [
    *QUICK,
    *SMALL_BATCH,
    f"max_steps={STEPS}",
    "environment.kind=repair",
    "environment.max_turns=2",
    "monitor.rollouts_every=1",
    "eval.every=0",
]

finished_run = batched_launch(__file__, "repair", tiny_args(SETTINGS))
"""The module's one launch, run beside the other batched modules' (launch_testing.batch)."""


def test_the_run_trains_its_three_steps(finished_run):
    assert_finished(*finished_run, steps=STEPS)


def test_some_trajectories_have_two_turns(finished_run):
    """A trajectory's response is both turns' tokens and the feedback between them: longer than
    one turn's cap (h92's runner; the codec carries response_ids as before)."""
    _, run_dir = finished_run
    rows = rollout_rows(run_dir)
    assert rows and any(r["response_tokens"] > CAP for r in rows)
    assert all(r["response_tokens"] <= 2 * CAP + 2000 for r in rows)


def _hidden_strings(problem) -> set[str]:
    """Inputs and outputs of the tests `repair` never shows (not among the visible ones and long
    enough not to turn up by chance)."""
    visible = list(getattr(problem, "public_tests", None) or problem.tests[:VISIBLE])
    shown = {str(t.get(k, "")).strip() for t in visible for k in ("input", "output")}
    hidden = [t for t in problem.tests if t not in visible]
    return {
        s
        for t in hidden
        for s in (str(t.get("input", "")).strip(), str(t.get("output", "")).strip())
        if len(s) >= 4 and not any(s in v for v in shown)
    }


def test_the_dump_shows_both_turns_and_the_feedback_hides_the_hidden_tests(finished_run):
    """h93's dump (every turn with its feedback) and h91's feedback (the visible tests only)."""
    _, run_dir = finished_run
    rows = rollout_rows(run_dir)
    two = [r for r in rows if len(r.get("turns") or []) >= 2]
    assert two, f"no dump row shows two turns; a row's keys: {sorted(rows[0])}"
    store = ProblemStore(run_dir / STORE_NAME)
    for r in two:
        feedback = r["turns"][0].get("feedback") or ""
        assert feedback.strip(), r["turns"][0]
        for s in _hidden_strings(store.get(r["prompt_id"])):
            assert s not in feedback, f"hidden test text {s!r} in the feedback of {r['prompt_id']}"
