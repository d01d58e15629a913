"""`microcoder bench learner --intake`: a learner batch's way from rank 0 to every rank, before
and after issue 17.

Two learner ranks as Ray actors (one process each) in one gloo group, and one synthetic batch of
`--groups` × `--group-size` responses of `--response-len` tokens (default 64 × 8 × 2,048), made
on rank 0 as the buffer client hands it out: decoded by buffer/codec.py (numpy views of the wire
frames). The buffer fetch itself is the same on both sides and is not timed. One step is timed
from the driver, from rank 0's first work to the end of the last rank's `build_batch`:

- before (the code up to issue 17, kept here as the baseline): rank 0 turns each group into
  Python lists (the old actors/convert.py: `to_sample_group`, `.tolist()` ×3) and `ray.put`s
  them; the driver hands the ref to every rank, which `ray.get`s the lists and builds the batch
  from them (the old learner/batch.py: `build_batch`, one `torch.tensor(list)` per sequence).
- after: rank 0 packs the arrays (learner/intake.py: `pack`); every rank receives the record by
  `broadcast` over the gloo group and builds the batch from it (learner/batch.py).

Steps alternate (before, after, before, ...) so machine noise hits both alike; the first of
each warms up. Both sides must build equal training batches (checked by a digest).
"""

from __future__ import annotations

import argparse
import hashlib
import time

from microcoder.protocol import Group, GroupScores, Response, Score, ScoredGroup


def add_arguments(group) -> None:
    group.add_argument("--response-len", type=int, default=2048, help="--intake: tokens/response")
    group.add_argument("--prompt-len", type=int, default=256, help="--intake: prompt tokens")
    group.add_argument(
        "--intake-steps", type=int, default=3, help="--intake: timed steps per side (default 3)"
    )


def synthetic_scored_groups(groups: int, size: int, prompt_len: int, response_len: int) -> list:
    """Scored groups as the buffer client decodes them (codec round trip), mixed rewards."""
    import numpy as np

    from microcoder.buffer.codec import group_frames, read_group

    rng = np.random.default_rng(0)
    out = []
    for g in range(groups):
        responses = [
            Response(
                response_ids=rng.integers(0, 150_000, response_len).astype(np.int32),
                logprobs=-rng.random(response_len).astype(np.float32),
                temperature=1.0,
                truncated=i == 0,
            )
            for i in range(size)
        ]
        prompt = rng.integers(0, 150_000, prompt_len).astype(np.int32)
        meta, _, tensors = group_frames(Group(g, f"p{g}", "", prompt, responses))
        scores = [Score(float(i % 2), "AC" if i % 2 else "CE") for i in range(size)]
        out.append(ScoredGroup(read_group(meta, None, tensors), GroupScores(g, scores)))
    return out


def baseline_to_sample_group(sg):
    """The old actors/convert.py: one scored group as Python lists."""
    from microcoder.learner.sample import SampleGroup, TrainSample

    prompt_ids = sg.group.prompt_ids.tolist()
    samples = [
        TrainSample(
            prompt_ids=prompt_ids,
            response_ids=r.response_ids.tolist(),
            behaviour_logprobs=r.logprobs.tolist(),
            temperature=r.temperature,
            reward=s.reward,
            truncated=r.truncated,
            verdict=s.verdict,
            policy_version=r.policy_version,
        )
        for r, s in zip(sg.group.responses, sg.result.scores, strict=True)
        if len(r.response_ids)
    ]
    return SampleGroup(group_id=str(sg.group.group_id), samples=samples)


def baseline_build_batch(groups, algo, generator) -> dict:
    """The old learner/batch.py `build_batch` from lists (its second filter included): the
    TrainBatch's tensors by field name."""
    import torch

    from microcoder.learner.algorithm import grpo

    kept = [g for g in groups if not algo.dynamic_filtering or grpo.group_has_signal(g.rewards)]
    samples = [s for g in kept for s in g.samples]
    group_index = torch.tensor([k for k, g in enumerate(kept) for _ in g.samples], dtype=torch.long)
    rewards = torch.tensor([s.reward for s in samples], dtype=torch.float32)
    truncated = torch.tensor([s.truncated for s in samples], dtype=torch.bool)
    advantages = grpo.group_advantages(rewards, group_index, algo.adv_eps)
    non_incorrect = torch.tensor([grpo.is_non_incorrect(s.verdict) for s in samples])
    looping = torch.tensor([grpo.is_looping(s.response_ids, algo.repeat_window) for s in samples])
    draws = grpo.mask_draws(len(samples), generator)
    masked = grpo.TRUNCATION_MASKS[algo.truncation_mask](
        truncated, non_incorrect, looping, draws, algo.rho
    )
    advantages = grpo.apply_mask(advantages, masked)
    return {
        "input_ids": [
            torch.tensor([*s.prompt_ids, *s.response_ids], dtype=torch.long) for s in samples
        ],
        "prompt_lens": torch.tensor([len(s.prompt_ids) for s in samples], dtype=torch.long),
        "response_lens": torch.tensor([len(s.response_ids) for s in samples], dtype=torch.long),
        "advantages": advantages.float(),
        "temperatures": torch.tensor([s.temperature for s in samples], dtype=torch.float32),
        "behaviour_logprobs": [
            torch.tensor(s.behaviour_logprobs, dtype=torch.float32) for s in samples
        ],
        "policy_versions": torch.tensor([s.policy_version for s in samples], dtype=torch.long),
    }


def batch_digest(input_ids, logprobs, advantages) -> str:
    import torch

    h = hashlib.sha256()
    for t in (torch.cat(input_ids), torch.cat(logprobs), advantages):
        h.update(t.contiguous().numpy().tobytes())
    return h.hexdigest()


class IntakeRank:
    """One learner rank of the bench (a Ray actor body): both sides' steps."""

    def __init__(self, rank: int, world: int):
        self.rank = rank
        self.world = world
        self.groups = []
        self.packed = None

    def setup(self, master: tuple[str, int], args: dict) -> None:
        import torch

        from microcoder.learner.config import AlgorithmConfig
        from microcoder.learner.distributed import init_distributed, set_rank_env

        set_rank_env(self.rank, self.world, master)
        init_distributed(torch.device("cpu"), 120)
        self.algo = AlgorithmConfig()
        if self.rank == 0:
            self.groups = synthetic_scored_groups(
                args["groups"], args["group_size"], args["prompt_len"], args["response_len"]
            )

    def before_fetch(self) -> dict:
        import ray

        t0 = time.perf_counter()
        lists = [baseline_to_sample_group(sg) for sg in self.groups]
        t1 = time.perf_counter()
        ref = ray.put(lists)
        return {"refs": [ref], "convert_s": t1 - t0, "put_s": time.perf_counter() - t1}

    def before_train(self, refs: list) -> dict:
        import ray

        from microcoder.learner.batch import mask_generator

        t0 = time.perf_counter()
        groups = ray.get(refs[0])
        t1 = time.perf_counter()
        b = baseline_build_batch(groups, self.algo, mask_generator(0, 0))
        t2 = time.perf_counter()
        digest = batch_digest(b["input_ids"], b["behaviour_logprobs"], b["advantages"])
        return {"get_s": t1 - t0, "build_s": t2 - t1, "digest": digest}

    def after_fetch(self) -> dict:
        from microcoder.actors.convert import to_group_arrays
        from microcoder.learner.intake import pack

        t0 = time.perf_counter()
        self.packed = pack([to_group_arrays(sg) for sg in self.groups])
        return {"pack_s": time.perf_counter() - t0}

    def after_train(self) -> dict:
        import torch

        from microcoder.learner.batch import build_batch, mask_generator
        from microcoder.learner.intake import broadcast

        t0 = time.perf_counter()
        mine = self.packed
        self.packed = None
        record = broadcast(mine, torch.device("cpu"))
        t1 = time.perf_counter()
        b = build_batch(record, self.algo, mask_generator(0, 0))
        t2 = time.perf_counter()
        digest = batch_digest(b.input_ids, b.behaviour_logprobs, b.advantages)
        return {"broadcast_s": t1 - t0, "build_s": t2 - t1, "digest": digest}

    def close(self) -> None:
        from microcoder.learner.distributed import close_distributed

        close_distributed()


def run(args: argparse.Namespace) -> dict:
    import ray

    from microcoder.learner.distributed import free_port

    world = 2
    ray.init(address="local", num_cpus=world + 2, include_dashboard=False, log_to_driver=False)
    try:
        cls = ray.remote(num_cpus=1)(IntakeRank)
        ranks = [cls.remote(r, world) for r in range(world)]
        shape = dict(
            groups=args.groups,
            group_size=args.group_size,
            prompt_len=args.prompt_len,
            response_len=args.response_len,
        )
        master = ("127.0.0.1", free_port())
        ray.get([r.setup.remote(master, shape) for r in ranks], timeout=600)
        times = {"before": [], "after": []}
        phases = {"before": [], "after": []}
        digests = set()
        for step in range(args.intake_steps + 1):  # step 0 warms both up
            for side in ("before", "after"):
                t0 = time.perf_counter()
                if side == "before":
                    fetched = ray.get(ranks[0].before_fetch.remote())
                    done = ray.get([r.before_train.remote(fetched["refs"]) for r in ranks])
                    fetched.pop("refs")
                else:
                    fetched = ray.get(ranks[0].after_fetch.remote())
                    done = ray.get([r.after_train.remote() for r in ranks])
                elapsed = time.perf_counter() - t0
                digests |= {d.pop("digest") for d in done}
                if step:
                    times[side].append(elapsed)
                    slowest = {k: max(d[k] for d in done) for k in done[0]}
                    phases[side].append({**fetched, **slowest})
        ray.get([r.close.remote() for r in ranks])
    finally:
        ray.shutdown()
    before = sum(times["before"]) / len(times["before"])
    after = sum(times["after"]) / len(times["after"])

    def mean_phases(side: str) -> dict:
        rows = phases[side]
        return {k: sum(r[k] for r in rows) / len(rows) for k in rows[0]}

    return {
        "intake": True,
        "before_s": before,
        "after_s": after,
        "ratio": before / after,
        "before_phases_s": mean_phases("before"),
        "after_phases_s": mean_phases("after"),
        "batches_equal": len(digests) == 1,
        "sequences": args.groups * args.group_size,
        "tokens": args.groups * args.group_size * (args.prompt_len + args.response_len),
        "ranks": world,
        "steps": args.intake_steps,
    }


def format_table(r: dict) -> str:
    def row(name: str, seconds: float, phases: dict) -> str:
        split = ", ".join(f"{k.removesuffix('_s')} {1e3 * v:.0f}" for k, v in phases.items())
        return f"{name:<7} {1e3 * seconds:>9.0f}   {split}"

    return "\n".join(
        [
            f"learner intake per step: {r['sequences']} sequences, {r['tokens'] / 1e6:.2f} M tokens,"
            f" {r['ranks']} ranks (gloo), {r['steps']} timed steps per side",
            f"{'side':<7} {'step ms':>9}   phases (ms; per-rank ones: the slowest rank)",
            row("before", r["before_s"], r["before_phases_s"]),
            row("after", r["after_s"], r["after_phases_s"]),
            f"ratio before/after: {r['ratio']:.1f}x; equal training batches: {r['batches_equal']}",
        ]
    )
