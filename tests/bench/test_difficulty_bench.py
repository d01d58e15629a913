"""`microcoder bench difficulty` (bench/difficulty.py): its problem file loads as a training set,
and its figures come from the buffer's counters of the last step record."""

from __future__ import annotations

import json

from microcoder.bench.difficulty import format_table, summary, write_problems
from microcoder.data.formats.loaders import load_problems


def test_the_problem_file_is_the_first_n_synthetic_tasks(tmp_path):
    path = write_problems(tmp_path / "p.jsonl", 12)
    problems = load_problems(str(path))
    assert len(problems) == 12 and len({p.id for p in problems}) == 12
    assert all(p.tests for p in problems)


def _step(step: int, consumed: int, filtered: int, **buf) -> str:
    b = {"issued": consumed + 5, "consumed": consumed, "filtered": filtered}
    return json.dumps(
        {
            "kind": "step",
            "step": step,
            "reward_mean": 0.5,
            "buffer": {**b, "response_tokens_in": 100 * consumed, **buf},
        }
    )


def test_the_summary_reads_the_last_steps_cumulative_counters(tmp_path):
    lines = [
        json.dumps({"kind": "start"}),
        _step(1, 20, 4),
        _step(2, 50, 18, retired=3, deferred=1, dropped_stale=10),
    ]
    (tmp_path / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    got = summary(tmp_path)
    assert got["steps"] == 2 and got["trained"] == 32
    assert got["discarded_share"] == 0.36 and got["groups_per_trained"] == round(50 / 32, 3)
    assert got["tokens_per_trained"] == round(5000 / 32, 1)
    assert (got["retired"], got["deferred"]) == (3, 1)
    assert got["all_discarded_share"] == round(28 / 60, 4)
    r = {"problems": 4, "steps": 2, "settings": ["x=1"], "off": got, "on": got, "run_dirs": "d"}
    table = format_table(r)
    assert "on = x=1" in table and "discarded_share" in table and "0.36" in table
