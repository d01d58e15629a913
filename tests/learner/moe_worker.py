"""One learner rank of the MoE-across-ranks test, run as a script with the rendezvous in the env
(or called in-process as `measure` for world 1).

    python moe_worker.py MODEL OUT

Builds a Learner on MODEL (counting the checkpoint bytes the load reads through safetensors'
get_tensor / get_slice), computes the learner's log-probs of the seeded check sequences, trains
one step on train_worker's synthetic groups, then rank 0 writes OUT/weights.safetensors (the
published `full_state_dict`) and every rank writes OUT/rank{rank}.json
({"bytes_read", "logprobs", "metrics"}).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import safetensors
from safetensors.torch import save_file

TEMPERATURE = 0.7
LR = 1e-4


class ReadCounter:
    """A stand-in for `safetensors.safe_open` that counts the bytes of every tensor read through
    get_tensor or get_slice(...)[...]."""

    def __init__(self, real) -> None:
        self.real, self.bytes = real, 0

    def __call__(self, *args, **kwargs):
        return _Handle(self, self.real(*args, **kwargs))

    def add(self, tensor):
        self.bytes += tensor.numel() * tensor.element_size()
        return tensor


class _Handle:
    """A counted safetensors file handle."""

    def __init__(self, counter: ReadCounter, inner) -> None:
        self.counter, self.inner = counter, inner

    def __enter__(self):
        self.inner.__enter__()
        return self

    def __exit__(self, *exc):
        return self.inner.__exit__(*exc)

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def get_tensor(self, name):
        return self.counter.add(self.inner.get_tensor(name))

    def get_slice(self, name):
        return _Slice(self.counter, self.inner.get_slice(name))


class _Slice:
    """A counted safetensors slice: indexing it reads."""

    def __init__(self, counter: ReadCounter, inner) -> None:
        self.counter, self.inner = counter, inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def __getitem__(self, index):
        return self.counter.add(self.inner[index])


def measure(model: str | Path, out: Path) -> dict:
    """Load (bytes counted), log-probs, one step, publish; returns this rank's record."""
    from train_worker import synthetic_groups

    import microcoder.learner.converted_rows as converted_rows
    import microcoder.learner.distributed as distributed
    from microcoder.learner.config import AlgorithmConfig, LearnerConfig
    from microcoder.learner.models import logprob_check as lc
    from microcoder.learner.trainer import Learner

    real = safetensors.safe_open
    counter = ReadCounter(real)
    # every module that opens the checkpoint binds safe_open at its head: count through each
    readers = (safetensors, converted_rows, distributed)
    for module in readers:
        module.safe_open = counter
    try:
        cfg = LearnerConfig(lr=LR, micro_batch_tokens=4096, grad_clip=100.0)
        learner = Learner(model, cfg, AlgorithmConfig(rho=0.5), seed=3)
    finally:
        for module in readers:
            module.safe_open = real
    logprobs = lc.learner_logprobs(learner, lc.seeded_sequences(300), TEMPERATURE)
    metrics = learner.train_step(synthetic_groups(0))
    weights = learner.full_state_dict()
    out.mkdir(parents=True, exist_ok=True)
    if learner.rank == 0:
        save_file({k: v.contiguous() for k, v in weights.items()}, out / "weights.safetensors")
    record = {"bytes_read": counter.bytes, "logprobs": logprobs, "metrics": metrics}
    (out / f"rank{learner.rank}.json").write_text(json.dumps(record))
    return record


def main() -> None:
    from microcoder.learner.distributed import close_distributed

    measure(sys.argv[1], Path(sys.argv[2]))
    close_distributed()


if __name__ == "__main__":
    main()
