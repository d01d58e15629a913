"""HSDP (`learner.replicas`, issue 44): which rows a shard loads on a 2-D mesh; the setting
reaches every learner rank; 4 gloo ranks as 2 replicas × 2 shards train like 1 rank (loss, global
grad norm, published weights) and hold half the model each; their checkpoint resumes exactly as
plain FSDP on 2 ranks (1 × 2), and a 1-rank checkpoint resumes exactly under HSDP (2 replicas × 1
shard). One module: the rank launches are shared fixtures (4 ranks on a small machine are slow).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from learner_ranks import spawn_ranks
from safetensors.torch import load_file
from torch.distributed.tensor import Replicate, Shard

from microcoder.learner.mesh import check_replicas, shard_rows

pytestmark = pytest.mark.timeout(900)

WORKER = Path(__file__).with_name("hsdp_worker.py")
BUDGET = 64  # tokens per micro-batch: 2 or more micro-batches per rank on 4 ranks
ATOL = 1e-5  # fp32, another reduction order; the largest difference seen is 5.7e-7


def launch(model: Path, out: Path, world: int, replicas: int, mode: str = "train") -> list[dict]:
    """Run hsdp_worker.py as `world` ranks with `replicas` replicas; every rank's record."""
    out.mkdir(parents=True, exist_ok=True)
    extra = {"learner": {"world_size": world, "replicas": replicas}}
    spawn_ranks(world, [str(WORKER), str(model), str(out), mode, str(BUDGET), json.dumps(extra)])
    return [json.loads((out / f"metrics{r}.json").read_text()) for r in range(world)]


def assert_same_weights(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], atol=ATOL, rtol=0, msg=k)


def assert_same_step(step: dict, ref: dict) -> None:
    assert step["version"] == ref["version"]
    assert step["tokens"] == ref["tokens"]
    assert step["loss"] == pytest.approx(ref["loss"], rel=1e-5, abs=1e-7)
    assert step["grad_norm"] == pytest.approx(ref["grad_norm"], rel=1e-5)


@pytest.fixture(scope="module")
def one_rank(small_model, tmp_path_factory):
    out = tmp_path_factory.mktemp("one-rank")
    return out, launch(small_model, out, 1, 1)


@pytest.fixture(scope="module")
def two_by_two(small_model, tmp_path_factory):
    out = tmp_path_factory.mktemp("two-by-two")
    return out, launch(small_model, out, 4, 2)


# --- the loader's rows (pure) -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "coordinate", "rows"),
    [(10, [0, 0], (0, 5)), (10, [0, 1], (5, 10)), (10, [1, 0], (0, 5)), (10, [1, 1], (5, 10))],
)
def test_hsdp_rows_follow_the_shard_dim_and_repeat_on_every_replica(n, coordinate, rows):
    got = shard_rows(n, (2, 2), coordinate, (Replicate(), Shard(0)))
    assert (got.start, got.stop) == rows


def test_uneven_rows_split_like_torch_chunk_on_either_mesh():
    n, shards = 5, 4
    expected = [(c[0].item(), c[-1].item() + 1) for c in torch.arange(n).chunk(shards)]
    expected += [(n, n)] * (shards - len(expected))  # chunk gives the last ranks nothing
    for coord in range(shards):
        flat = shard_rows(n, (shards,), [coord], (Shard(0),))
        hsdp = shard_rows(n, (3, shards), [2, coord], (Replicate(), Shard(0)))
        assert (flat.start, flat.stop) == (hsdp.start, hsdp.stop) == expected[coord]


def test_a_placement_the_loader_cannot_read_is_refused_with_what_to_do():
    with pytest.raises(NotImplementedError, match="Shard\\(0\\) or Replicate"):
        shard_rows(8, (2, 2), [0, 1], (Replicate(), Shard(1)))


def test_replicas_that_do_not_divide_the_group_are_refused():
    check_replicas(4, 2)
    with pytest.raises(ValueError, match="divisor of learner.world_size"):
        check_replicas(4, 3)


def test_replicas_reach_every_learner_rank_and_a_shape_that_cannot_form_is_refused():
    from microcoder.config import ConfigError
    from microcoder.launch.config import load_config
    from microcoder.launch.run.actor_settings import learner_rank_settings

    cfg = load_config(None, ["learner.world_size=4", "learner.replicas=2"])
    assert learner_rank_settings(cfg).learner.replicas == 2  # what LearnerRank.setup builds from
    with pytest.raises(ConfigError, match="replicas = 3 does not divide"):
        load_config(None, ["learner.world_size=4", "learner.replicas=3"])


# --- 4 gloo ranks as 2 × 2 --------------------------------------------------------------------


@pytest.mark.slow
def test_two_replicas_of_two_shards_train_like_one_rank(one_rank, two_by_two):
    """Two steps with several micro-batches a rank, the cross-replica all-reduce on the last
    one only: loss, the global grad norm and the published weights equal 1 rank's."""
    (ref_out, ref), (out, ranks) = one_rank, two_by_two
    assert [r["mesh"] for r in ranks] == [[2, 2]] * 4
    assert max(max(r["micro_batches"]) for r in ranks) >= 2  # accumulation is exercised
    for r in ranks:  # the cross-replica all-reduce: once per FSDP module and step, not per micro
        assert r["cross_replica_all_reduces"] == [r["fsdp_modules"]] * 2
    for step, ref_step in zip(ranks[0]["steps"], ref[0]["steps"], strict=True):
        assert_same_step(step, ref_step)
    for name in ("weights1", "weights2"):
        assert_same_weights(
            load_file(out / f"{name}.safetensors"), load_file(ref_out / f"{name}.safetensors")
        )


@pytest.mark.slow
def test_a_replica_holds_the_whole_model_once_and_replicas_hold_the_same_shards(
    one_rank, two_by_two
):
    """Parameters and AdamW moments: ranks 0-1 (replica 0) hold the model once between them,
    as ranks 2-3 (replica 1) do, so a rank holds about half the model, not a quarter."""
    ref, ranks = one_rank[1][0]["bytes"], [r["bytes"] for r in two_by_two[1]]
    for kind in ("params", "optimizer"):
        assert ranks[0][kind] + ranks[1][kind] == ref[kind]
        assert (ranks[2][kind], ranks[3][kind]) == (ranks[0][kind], ranks[1][kind])
    assert ref["optimizer"] == 2 * ref["params"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("source", "world", "replicas"),
    [("two_by_two", 2, 1), ("one_rank", 2, 2)],
    ids=["2x2-to-1x2", "1x1-to-2x1"],
)
def test_a_checkpoint_resumes_exactly_on_another_mesh(
    source, world, replicas, request, small_model, one_rank, tmp_path
):
    """The DCP masters and AdamW state saved on one mesh, resharded on another: the next step
    equals the uninterrupted 1-rank run's."""
    ref_out, ref = one_rank
    saved = request.getfixturevalue(source)[0] / "ckpt"
    ranks = launch(small_model, tmp_path, world, replicas, f"from:{saved}")
    assert ranks[0]["mesh"] == ([world] if replicas == 1 else [replicas, world // replicas])
    assert_same_step(ranks[0]["steps"][0], ref[0]["steps"][1])
    assert_same_weights(
        load_file(tmp_path / "weights2.safetensors"), load_file(ref_out / "weights2.safetensors")
    )
