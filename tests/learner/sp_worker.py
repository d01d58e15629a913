"""One learner rank for the sequence-parallel tests, run as a script with the rendezvous in the
env (tests/learner/learner_ranks.py: spawn_ranks).

    python sp_worker.py MODEL OUT OVERRIDES_JSON

Trains one step on one fixed 512-token packed batch (two groups of four sequences) with
learner.micro_batch_tokens = 512 and OVERRIDES_JSON {"learner": {...}, "runs": [MODE, ...]}: per
MODE a fresh Learner, "plain" (the batch through train_step), "nan" (one behaviour log-prob
NaN, the batch trained without the intake's filter of them) or "masked" (every sequence a
two-turn trajectory: 8 feedback tokens a third of the way in, out of the loss by its mask, their
behaviour log-probs garbage); a forward hook on decoder layer 0
records the tokens each call sees. Rank 0 writes OUT/MODE/weights.safetensors; every rank
writes OUT/MODE/metrics{rank}.json: {"metrics", "layer0_tokens"}.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

from microcoder.learner.batch import build_batch, mask_generator
from microcoder.learner.config import AlgorithmConfig, LearnerConfig
from microcoder.learner.distributed import close_distributed
from microcoder.learner.intake import pack, sample_group_arrays
from microcoder.learner.sample import SampleGroup, TrainSample
from microcoder.learner.trainer import Learner

SHAPES = [(10, [90, 80, 60, 40]), (8, [70, 50, 40, 10])]
"""(prompt tokens, response tokens of its four samples) of each group: 512 tokens in all."""


def batch_512(vocab: int = 250, nan: bool = False, masked: bool = False) -> list[SampleGroup]:
    """Two groups with mixed rewards whose 8 sequences hold 512 tokens together. `nan`: the
    behaviour log-prob of the first response token of group 1's first sequence is NaN (packed
    third, at tokens 190-267 of the row: the token is in the first half, the sequence crosses
    into the second)."""
    groups = []
    for k, (p, responses) in enumerate(SHAPES):
        prompt = [(7 * k + 3 * j) % vocab for j in range(p)]
        samples = []
        for i, r in enumerate(responses):
            resp = [(11 * i + 5 * j + k) % vocab for j in range(r)]
            logp = [-3.0 - (j % 7) * 0.5 for j in range(r)]
            if nan and (k, i) == (1, 0):
                logp[0] = float("nan")
            mask = None
            if masked:  # a feedback run of 8 tokens a third of the way in
                mask = [0 if r // 3 <= j < r // 3 + 8 else 1 for j in range(r)]
                logp = [
                    lp if m else 9.0 + j for j, (lp, m) in enumerate(zip(logp, mask, strict=True))
                ]
            samples.append(
                TrainSample(
                    prompt,
                    resp,
                    logp,
                    (0.8, 1.0, 1.2)[i % 3],
                    float(i % 2),
                    False,
                    "",
                    0,
                    loss_mask=mask,
                )
            )
        groups.append(SampleGroup(f"sp-{k}", samples))
    return groups


def main() -> None:
    model, out, extra = sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3])
    cfg = LearnerConfig(lr=1e-3, micro_batch_tokens=512, grad_clip=100.0, **extra["learner"])
    for mode in extra["runs"]:
        (out / mode).mkdir(parents=True, exist_ok=True)
        learner = Learner(model, cfg, AlgorithmConfig(rho=0.5), seed=3)
        record = one_step(learner, nan=mode == "nan", masked=mode == "masked")
        weights = learner.full_state_dict()
        if learner.rank == 0:
            tensors = {k: v.contiguous() for k, v in weights.items()}
            save_file(tensors, out / mode / "weights.safetensors")
        (out / mode / f"metrics{learner.rank}.json").write_text(json.dumps(record))
        del learner
    close_distributed()


def one_step(learner: Learner, nan: bool, masked: bool = False) -> dict:
    """One step on the batch: {"metrics", "layer0_tokens": what decoder layer 0 saw a call}."""
    seen: list[int] = []
    layer0 = learner.model.get_decoder().layers[0]
    hook = layer0.register_forward_hook(lambda _m, args, _o: seen.append(args[0].shape[1]))
    loss_uncounted = None
    if (
        not nan and not masked
    ):  # a caller's micro-batch without its sequence count: the SP ranks agree on it
        groups = [sample_group_arrays(g, k) for k, g in enumerate(batch_512())]
        built = build_batch(pack(groups), learner.algo, mask_generator(learner.seed, 0))
        with torch.no_grad():
            loss_uncounted = float(
                learner._loss_and_stats(learner._micro_batches(built)[0], None)[0]
            )
        seen.clear()
    if nan:  # past the intake's filter of non-finite behaviour log-probs
        groups = [sample_group_arrays(g, k) for k, g in enumerate(batch_512(nan=True))]
        built = build_batch(pack(groups), learner.algo, mask_generator(learner.seed, 0))
        metrics = learner.train_on_batch(built)
    else:
        metrics = learner.train_step(batch_512(masked=masked))
    hook.remove()
    return {"metrics": metrics, "layer0_tokens": seen, "loss_uncounted": loss_uncounted}


if __name__ == "__main__":
    main()
