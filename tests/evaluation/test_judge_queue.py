"""Several threads judging on one real JudgePool through SharedJudge (the executor's eval path)."""

from __future__ import annotations

import threading
from pathlib import Path

from microcoder.data.formats.loaders import load_problems
from microcoder.evaluation.judge_queue import SharedJudge
from microcoder.sandbox import JudgePool

MIXED = Path(__file__).parents[1] / "fixtures" / "data" / "eval_mixed.jsonl"


def test_concurrent_calls_each_get_their_own_verdicts_in_order():
    problems = load_problems(MIXED)
    lock = threading.Lock()
    with JudgePool(workers=2) as pool:
        judge = SharedJudge(pool, lock)
        results: dict[int, list] = {}

        def call(t: int) -> None:
            jobs = [
                (p, p.meta["solution"] if (i + t) % 2 else "print(") for i, p in enumerate(problems)
            ]
            results[t] = judge.judge(jobs, timeout_s=120)

        threads = [threading.Thread(target=call, args=(t,)) for t in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        judge.close()
        assert judge.judged == 4 * len(problems)
    for t, verdicts in results.items():
        want = ["AC" if (i + t) % 2 else "not AC" for i in range(len(problems))]
        got = ["AC" if v.verdict == "AC" else "not AC" for v in verdicts]
        assert got == want
        assert [v.problem_id for v in verdicts] == [p.id for p in problems]
    assert not lock.locked()
