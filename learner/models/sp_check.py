"""`microcoder model check DIR --sequence-parallel N`: the learner's log-probs with each packed
row split over N ranks (learner/sequence_parallel.py), for comparison with transformers'.

`sp_logprobs` spawns N local processes that join one gloo group (the env rendezvous the Ray
learner actors use: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE) and runs this module's `main`
in each: per model folder, a `Learner` with learner.world_size = learner.sequence_parallel = N
scores the sequences as one packed micro-batch, unchunked and chunked, every rank its slice;
rank 0 writes the joined log-probs as JSON. Several folders share one spawn (the tests check
every family at once).

    python -m microcoder.learner.models.sp_check OUT_JSON REQUEST_JSON
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from microcoder.learner.config import AlgorithmConfig, LearnerConfig

CHUNK = 7
"""Chunk size of the chunked run (model_check.CHUNK: several uneven chunks over 40 tokens)."""


def sp_logprobs(
    model_dirs: list[str | Path],
    sequences: list[list[int]],
    temperature: float,
    size: int,
    config_overrides: dict | None = None,
    timeout_s: float = 900.0,
) -> dict[str, dict[str, list[list[float]]]]:
    """{model dir: {"unchunked", "chunked"}}: the learner's log-probs of `sequences`
    (logprob_check's layout) at `temperature` on `size` spawned CPU gloo ranks with
    learner.sequence_parallel = size, the model's config changed by `config_overrides`
    (model.config_overrides). Raises RuntimeError with every rank's log tail when a
    rank fails."""
    with tempfile.TemporaryDirectory(prefix="microcoder-sp-check-") as tmp:
        out = Path(tmp) / "logprobs.json"
        request = {"models": [str(d) for d in model_dirs], "sequences": sequences}
        request |= {"temperature": temperature, "size": size}
        request |= {"overrides": dict(config_overrides or {})}
        argv = ["-m", __name__, str(out), json.dumps(request)]
        spawn_gloo_ranks(argv, size, timeout_s)
        if not out.is_file():
            raise RuntimeError(f"the {size} sequence-parallel check ranks wrote no {out.name}")
        return json.loads(out.read_text())


def spawn_gloo_ranks(argv: list[str], size: int, timeout_s: float = 900.0) -> list[str]:
    """Run `python *argv` as `size` CPU ranks of one gloo group (env rendezvous on a free local
    port) to completion; their logs. Raises RuntimeError with every rank's log tail unless all
    exit 0."""
    from microcoder.learner.distributed import free_port

    port = str(free_port())
    procs = []
    for rank in range(size):
        env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port}
        env |= {"RANK": str(rank), "WORLD_SIZE": str(size), "LOCAL_RANK": str(rank)}
        env |= {"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}  # gloo ranks on CPU
        procs.append(
            subprocess.Popen(
                [sys.executable, *argv], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
            )
        )
    logs = [p.communicate(timeout=timeout_s)[0].decode(errors="replace") for p in procs]
    if any(p.returncode for p in procs):
        tails = "\n".join(
            f"--- rank {r} (exit {p.returncode}) ---\n{log[-1500:]}"
            for r, (p, log) in enumerate(zip(procs, logs, strict=True))
        )
        raise RuntimeError(f"{size} gloo ranks of {' '.join(argv[:2])} failed:\n{tails}")
    return logs


def main() -> None:
    """One rank: each folder's log-probs, unchunked and chunked; rank 0 writes them."""
    from microcoder.learner.distributed import close_distributed
    from microcoder.learner.models.logprob_check import learner_logprobs
    from microcoder.learner.trainer import Learner

    out = Path(sys.argv[1])
    request = json.loads(sys.argv[2])
    size = request["size"]
    seqs = request["sequences"]
    temperature = request["temperature"]
    got: dict[str, dict] = {}
    rank = 0
    for model_dir in request["models"]:
        for name, chunk in (("unchunked", 0), ("chunked", CHUNK)):
            cfg = LearnerConfig(
                world_size=size,
                sequence_parallel=size,
                logprob_chunk_tokens=chunk,
                packing=True,
                micro_batch_tokens=4096,
            )
            learner = Learner(
                model_dir,
                cfg,
                AlgorithmConfig(),
                device="cpu",
                config_overrides=request["overrides"],
            )
            got.setdefault(model_dir, {})[name] = learner_logprobs(learner, seqs, temperature)
            rank = learner.rank
            del learner
    if rank == 0:
        out.write_text(json.dumps(got))
    close_distributed()


if __name__ == "__main__":
    main()
