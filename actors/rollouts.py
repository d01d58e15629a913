"""The rollouts log: a training step's responses as JSONL, every `monitor.rollouts_every` steps.

    RUN_DIR/rollouts/step-<S>.jsonl      one line per response, at most monitor.rollouts_max

Rank 0 builds the rows while it fetches the step's batch (actors/learner_rank.py:
`fetch_batch`, which asks the buffer for the groups' texts on those steps only), from the groups
it trains on, in batch order, whole groups first until the row budget is spent; the driver
writes them (launch/run/training_loop.py), so the file lands in the run directory wherever rank 0
runs. Each row:

    step             the step (policy version) the batch trains
    prompt_id        the problem's dataset id
    group_id         the buffer's group id
    index            the response's position in its group
    response         its text; a longer one than ROLLOUT_CHARS keeps its head (a quarter) and
                     its tail (the rest, where the final program of a reasoning response
                     stands), joined by a line that says how many characters were cut
    response_chars   the text's full length in characters
    response_tokens  its token count
    verdict          the judge's verdict (AC, WA, ..., `unfinished`; `no_code` for a response
                     with nothing to run, judged WA: learner/verdict_stats.py)
    reward           the judge's reward (before any overlong penalty)
    advantage        the advantage it trains with (after the truncation mask), or null when it
                     is not trained (an empty response, or a non-finite behaviour log-prob)
    mask             `kept`, `masked` (the truncation mask zeroed its advantage) or
                     `not_trained`
    truncated        it hit generator.max_response_tokens
    policy_version   the version that sampled its first token
    generator        the generator that sampled the group
    source           the data source of its prompt (data.sources' name; "" when unknown)
    turns            multi-turn trajectories only (`environment.kind` not "single"; absent
                     otherwise): every model turn in order, each {"turn" (1, 2, ...),
                     "response" (its text, clipped as `response`), "response_chars",
                     "response_tokens", "feedback" (what the environment answered after it,
                     clipped alike; "" for the last turn), "feedback_tokens", "passed" (the
                     environment's check, e.g. repair's visible tests; null when unchecked),
                     "truncated", "policy_version", "metrics" (the environment's named
                     numbers)}. The row's `response` is then the last turn's text (what was
                     judged) and `response_tokens` the whole trajectory's, feedback included

The advantages and mask decisions are those the step trains with: rank 0 builds the training
batch from the same packed batch with the same seeded mask draws (learner/batch.py:
`build_batch`, `mask_generator(seed, version)`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from microcoder.actors.convert import verdict_label
from microcoder.protocol import ScoredGroup, Turn

ROLLOUT_CHARS = 4000
"""A response's text in the rollouts log is clipped to about this many characters (head and tail,
`clip_middle`; `response_chars` keeps the full length), so a step's file stays under about
rollouts_max × 4 KB."""
HEAD_SHARE = 4
"""A clipped response keeps its first ROLLOUT_CHARS // HEAD_SHARE characters; the tail the rest."""
ROLLOUTS_DIR = "rollouts"
"""The run directory's folder of rollouts logs."""


def due(step: int, every: int) -> bool:
    """Whether step `step` writes its rollouts (`monitor.rollouts_every` = `every`; 0 = never)."""
    return every > 0 and step % every == 0


def clip_middle(text: str, max_chars: int = ROLLOUT_CHARS) -> str:
    """`text` if it fits in `max_chars`, else its head and tail (module doc) around a marker line.

    The judged program of a long reasoning response is at its end, so a head-only clip would show
    the reasoning and cut the program; the head still shows how the response began."""
    if len(text) <= max_chars:
        return text
    head = max_chars // HEAD_SHARE
    tail = max_chars - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters cut ...]\n{text[-tail:]}"


def rollout_rows(
    step: int,
    groups: Sequence[ScoredGroup],
    trained: dict[tuple[int, int], tuple[float, bool]],
    max_rows: int,
    max_chars: int = ROLLOUT_CHARS,
) -> list[dict[str, Any]]:
    """At most `max_rows` rows (module doc) over `groups` in order. `trained`: (group id,
    response index) -> (advantage, masked) of each trained response."""
    rows: list[dict[str, Any]] = []
    for sg in groups:
        g = sg.group
        for i, (r, s) in enumerate(zip(g.responses, sg.result.scores, strict=True)):
            if len(rows) >= max_rows:
                return rows
            text = r.text or ""
            adv, masked = trained.get((g.group_id, i), (None, None))
            rows.append(
                {
                    "step": step,
                    "prompt_id": g.problem_id,
                    "group_id": g.group_id,
                    "index": i,
                    "response": clip_middle(text, max_chars),
                    "response_chars": len(text),
                    "response_tokens": len(r.response_ids),
                    "verdict": verdict_label(s),
                    "reward": s.reward,
                    "advantage": adv,
                    "mask": "not_trained" if masked is None else ("masked" if masked else "kept"),
                    "truncated": bool(r.truncated),
                    "policy_version": r.policy_version,
                    "generator": g.generator,
                    "source": g.source,
                    **({"turns": turn_rows(r.turns, max_chars)} if r.turns else {}),
                }
            )
    return rows


def turn_rows(turns: Sequence[Turn], max_chars: int = ROLLOUT_CHARS) -> list[dict[str, Any]]:
    """A trajectory's turns as the rows' `turns` entries (module doc), texts clipped."""
    return [
        {
            "turn": k,
            "response": clip_middle(t.text, max_chars),
            "response_chars": len(t.text),
            "response_tokens": t.end - t.start,
            "feedback": clip_middle(t.feedback, max_chars),
            "feedback_tokens": t.feedback_tokens,
            "passed": t.passed,
            "truncated": t.truncated,
            "policy_version": t.policy_version,
            "metrics": dict(t.metrics),
        }
        for k, t in enumerate(turns, 1)
    ]


def trained_responses(kept, advantages, masked) -> dict[tuple[int, int], tuple[float, bool]]:
    """(group id, response index) -> (advantage, masked) of the packed batch's sequences:
    `kept` the GroupArrays packed (learner/intake.py), `advantages` / `masked` the TrainBatch's
    [S] tensors, sequences in the same order."""
    keys = [(g.group_id, int(i)) for g in kept for i in g.response_index]
    values = zip(advantages.tolist(), masked.tolist(), strict=True)
    return dict(zip(keys, values, strict=True))


def write_rollouts(run_dir: str | Path, step: int, rows: Sequence[dict[str, Any]]) -> Path:
    """Write `rows` to RUN_DIR/rollouts/step-<step>.jsonl (replacing a file of a resumed run)."""
    path = Path(run_dir) / ROLLOUTS_DIR / f"step-{step}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".jsonl.tmp")
    with tmp.open("w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    tmp.replace(path)
    return path
