"""Finding 1 of issue 31: every collective of the learner is legal on the CUDA path.

A real 2-rank learner (gloo, CPU) joins the group, receives a broadcast batch, trains one step
(two mini-batches, several micro-batches), publishes and checkpoints, while
tests/gpu_path/collective_recorder.py records each collective. On CUDA the group is
`process_group_backend("cuda")`; the record shows which device each collective's tensors would
be on there: the compute device, unless the code made the tensor on the host.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from microcoder.learner.distributed import process_group_backend

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "learner"))
from learner_ranks import spawn_ranks  # noqa: E402

pytestmark = pytest.mark.timeout(900)  # the module fixture spawns two ranks


def backend_by_device(backend: str) -> dict[str, str]:
    """Which backend serves tensors of each device type in a group made with `backend`."""
    if ":" in backend:
        return dict(part.split(":") for part in backend.split(","))
    return {"nccl": {"cuda": "nccl"}, "gloo": {"cpu": "gloo", "cuda": "gloo"}}[backend]


@pytest.fixture(scope="module")
def two_rank_run(tiny_model_dir, tmp_path_factory):
    """Each rank's {compute_device, metrics, records} after the recorded 2-rank run."""
    out = tmp_path_factory.mktemp("collectives")
    spawn_ranks(2, [str(HERE / "collective_worker.py"), str(tiny_model_dir), str(out)])
    return [json.loads((out / f"collectives{r}.json").read_text()) for r in range(2)]


@pytest.mark.slow
def test_a_two_rank_gloo_learner_step_trains_and_agrees_across_ranks(two_rank_run):
    m0, m1 = (run["metrics"] for run in two_rank_run)
    assert m0["version"] == 1.0 and math.isfinite(m0["loss"]) and m0["grad_norm"] > 0
    assert m0["tokens"] > 0 and m0["response_len_mean"] > 0
    for key in ("loss", "tokens", "clip_frac", "entropy", "is_weight_max", "grad_norm"):
        assert m0[key] == pytest.approx(m1[key], rel=1e-12), key


@pytest.mark.slow
def test_no_learner_collective_gets_a_tensor_made_on_the_host(two_rank_run):
    """On CUDA a host-made tensor is a CPU tensor: NCCL would refuse it. Object collectives
    (checkpointing's pickled plans) are torch's own and placed by torch."""
    for rank, run in enumerate(two_rank_run):
        ours = [r for r in run["records"] if not r["in_object_collective"]]
        ops = {r["op"] for r in ours}
        assert {"broadcast", "all_gather", "barrier"} <= ops, ops  # intake, stats, checkpoint
        assert any(r["op"].startswith("reduce_scatter") for r in ours), ops  # FSDP2 gradients
        bad = [r for r in ours if r["host_made"]]
        assert not bad, f"rank {rank}: collectives given host-made tensors: {bad[:5]}"
        assert {r["device"] for r in ours} <= {run["compute_device"], ""}


@pytest.mark.slow
def test_the_cuda_group_serves_every_device_the_cuda_path_would_use(two_rank_run):
    """Project each record onto the CUDA path (compute-device tensors -> cuda, host-made and
    object-collective tensors -> cpu) and check that the CUDA group has a backend for each."""
    serves = backend_by_device(process_group_backend("cuda"))
    for run in two_rank_run:
        for r in run["records"]:
            if not r["device"]:
                continue  # a barrier: runs on the group's own device
            on_cuda_path = "cpu" if r["host_made"] or r["in_object_collective"] else "cuda"
            assert on_cuda_path in serves, f"{r} would meet {process_group_backend('cuda')}"


def test_cpu_learners_use_gloo_and_cuda_learners_nccl_for_device_tensors():
    assert backend_by_device(process_group_backend("cpu"))["cpu"] == "gloo"
    cuda = backend_by_device(process_group_backend("cuda"))
    assert cuda["cuda"] == "nccl"
    assert cuda["cpu"] == "gloo", "CPU tensors (object collectives) need a CPU backend on CUDA"


def test_an_unknown_device_type_is_refused_naming_the_setting():
    with pytest.raises(ValueError, match="set device to auto, cpu or cuda"):
        process_group_backend("mps")
