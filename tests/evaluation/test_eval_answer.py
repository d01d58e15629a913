"""The held-out eval scores `answer` problems with the run's reward function, as training does
(issue 34): replies go to the executor's `score_replies` (sandbox/rewards/plugin.py
`score_reply`, the path of actors/scoring.py), never to the sandbox, which refuses the kind.
Through `evaluate` with a real Executor actor (given replies, no model), and through
`microcoder eval --generations` on the answer-tiny problem file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from microcoder.data.formats.loaders import load_problems
from microcoder.evaluation.engine import evaluate
from microcoder.evaluation.generations import Generation, read_generations
from microcoder.evaluation.settings import EvalSettings
from microcoder.launch.cli.main import main
from microcoder.sandbox.rewards.answer import exact_answer

ANSWERS = Path(__file__).parents[2] / "configs" / "answer-tiny.jsonl"


def replies(problem) -> list[str]:
    """Four replies to one problem: boxed right, right after reasoning, wrong, cut inside the
    reasoning (a right draft in it: scored 0, as in training)."""
    right = problem.tests[0]["output"]
    return [
        f"The total is \\boxed{{{right}}}.",
        f"<think>count them</think>\nAnswer: {right}",
        "\\boxed{-12345}",
        f"<think>maybe \\boxed{{{right}}}",
    ]


@pytest.fixture(scope="module")
def problems():
    return load_problems(ANSWERS)[:3]


@pytest.fixture(scope="module")
def executor(ray_local):
    from microcoder.actors.remote import executor_cls
    from microcoder.launch.config import load_config

    cfg = load_config(None, ["executor.workers=1"]).executor
    handle = executor_cls(cfg).remote("executor-0", cfg)
    ray_local.get(handle.ready.remote(), timeout=120)
    yield handle
    ray_local.get(handle.shutdown.remote(), timeout=60)
    ray_local.kill(handle)


def test_answer_replies_are_scored_by_the_reward_function_through_the_eval_path(
    ray_local, executor, problems, tmp_path
):
    given = [Generation(p.id, i, text, 1) for p in problems for i, text in enumerate(replies(p))]
    report = evaluate(problems, EvalSettings(ks=[1]), [], [executor], tmp_path, generations=given)
    # training's reward of each reply, straight from the shipped function
    expected = [exact_answer(p, t)[0] for p in problems for t in replies(p)]
    assert expected == [1.0, 1.0, 0.0, 0.0] * len(problems)
    assert report["pass_at_k"] == {"1": 0.5}
    assert report["verdicts"] == {"AC": 2 * len(problems), "WA": 2 * len(problems)}
    rows = [json.loads(line) for line in (tmp_path / "samples.jsonl").read_text().splitlines()]
    by_key = {(r["problem_id"], r["sample_index"]): r for r in rows}
    first = by_key[(problems[0].id, 0)]
    assert first["passed"] and first["message"] == "reward 1, formatted 1"
    assert first["code"] == replies(problems[0])[0]  # the reply the reward function scored
    assert by_key[(problems[0].id, 1)]["message"] == "reward 1, formatted 1"
    assert by_key[(problems[0].id, 3)]["message"] == "reward 0, formatted 0"
    stats = ray_local.get(executor.eval_stats.remote(), timeout=60)
    assert stats["judged"] == 0 and stats["reward_errors"] == 0  # nothing ran in the sandbox


def test_microcoder_eval_scores_a_generations_file_of_answer_replies(ray_local, problems, tmp_path):
    gens = tmp_path / "g.jsonl"
    with open(gens, "w") as f:
        for p in problems:
            for i, text in enumerate(replies(p)):
                f.write(json.dumps({"problem_id": p.id, "sample_index": i, "text": text}) + "\n")
    # the reply is kept whole: no code extraction for a kind the sandbox does not run
    ids = {p.id for p in load_problems(ANSWERS)}
    read = read_generations(gens, ids, replies=ids)
    assert [g.code for g in read[:4]] == replies(problems[0])
    out = tmp_path / "out"
    argv = ["eval", "--problems", str(ANSWERS), "--generations", str(gens), "--out", str(out)]
    assert main([*argv, "--quiet", "--set", "executor.workers=1"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["problems"] == len(problems) and report["samples_per_problem"] == 4
    assert report["pass_at_k"] == {"1": 0.5}


def test_a_raising_reward_function_gives_that_reply_se_and_is_counted(problems):
    """As a training group fails and the executor goes on: the eval records SE, named."""
    from microcoder.actors.executor import Executor

    def boom(problem, response, verdict):
        raise ZeroDivisionError("no answer key")

    ex = Executor.__new__(Executor)  # the method's state only: no pool, no Ray
    ex.name, ex.problems, ex.eval_reward_errors = "executor-0", {problems[0].id: problems[0]}, 0
    ex.reward_fn = boom
    (got,) = ex.score_replies([(problems[0].id, "\\boxed{7}")])
    assert got["verdict"] == "SE" and not got["passed"]
    assert "boom raised ZeroDivisionError: no answer key" in got["message"]
    assert ex.eval_reward_errors == 1
    with pytest.raises(KeyError, match="add_problems"):
        ex.score_replies([("nowhere", "7")])
