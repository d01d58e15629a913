"""The off-policy corrections (learner/algorithm/off_policy.py: OFF_POLICY), each against its formula
written out here in plain Python on hand-made ratios, the edges (all in band, all out, no
tokens, a dummy token), where they must equal `tis`; and the config rules around them."""

from __future__ import annotations

import math
import typing

import pytest
import torch

from microcoder.config import ConfigError
from microcoder.launch.config import load_config
from microcoder.learner.algorithm import off_policy
from microcoder.learner.config import AlgorithmConfig, LearnerConfig, OffPolicy
from microcoder.learner.trainer import Learner

CAP = 2.0
# three sequences: 0 has 3 tokens, 1 has 1, 2 has 2
RATIOS = [1.5, 3.0, 0.25, 0.8, 1.2, 0.9]
SEQ = [0, 0, 0, 1, 2, 2]


def run(mode: str, ratios=RATIOS, seq=SEQ, cap=CAP) -> off_policy.Correction:
    log_ratio = torch.tensor([math.log(r) for r in ratios], dtype=torch.float32)
    seq_index = torch.tensor(seq, dtype=torch.long)
    num_seqs = max([s + 1 for s in seq], default=0)
    return off_policy.correct(mode, log_ratio, seq_index, num_seqs, cap)


def by_seq(values, seq):
    out: dict[int, list[float]] = {}
    for v, s in zip(values, seq, strict=True):
        out.setdefault(s, []).append(v)
    return out


def close(t: torch.Tensor, expected: list[float]) -> None:
    assert t.tolist() == pytest.approx(expected, rel=1e-5, abs=1e-7)


def test_the_registry_names_exactly_the_config_choices():
    assert set(off_policy.OFF_POLICY) == set(typing.get_args(OffPolicy))
    assert AlgorithmConfig().off_policy == "tis"
    with pytest.raises(ValueError, match="geo-reject"):
        run("sequence")


def test_none_weights_every_token_one():
    c = run("none")
    close(c.weight, [1.0] * 6)
    assert not c.dropped.any() and not c.capped.any()


def test_tis_is_the_token_ratio_capped_above():
    c = run("tis")
    close(c.weight, [min(r, CAP) for r in RATIOS])
    assert c.capped.tolist() == [r >= CAP for r in RATIOS]
    assert not c.dropped.any()


def test_seq_tis_is_the_sequence_product_capped():
    c = run("seq-tis")
    prods = {s: math.prod(rs) for s, rs in by_seq(RATIOS, SEQ).items()}  # 1.125, 0.8, 1.08
    close(c.weight, [min(prods[s], CAP) for s in SEQ])
    assert not c.capped.any()
    c = run("seq-tis", [1.5, 1.5, 1.5, 3.0], [0, 0, 0, 1])  # 3.375 and 3.0: both capped
    close(c.weight, [CAP] * 4)
    assert c.capped.all()


def test_seq_tis_equals_tis_on_one_token_sequences():
    ratios = [0.1, 0.7, 1.0, 1.9, 2.5, 40.0]
    one_each = list(range(len(ratios)))
    a, b = run("seq-tis", ratios, one_each), run("tis", ratios, one_each)
    torch.testing.assert_close(a.weight, b.weight)
    assert torch.equal(a.capped, b.capped)


def test_seq_tis_does_not_overflow_on_a_long_sequence():
    c = run("seq-tis", [3.0] * 2000, [0] * 2000)  # 3^2000 overflows any float
    close(c.weight, [CAP] * 2000)


def test_mask_keeps_the_ratio_inside_the_band_and_drops_the_rest():
    c = run("mask")
    inside = [1 / CAP <= r <= CAP for r in RATIOS]  # 3.0 and 0.25 are out
    close(c.weight, [r if ok else 0.0 for r, ok in zip(RATIOS, inside, strict=True)])
    assert c.dropped.tolist() == [not ok for ok in inside]


def test_mask_equals_tis_when_every_ratio_is_in_the_band():
    ratios = [0.5, 0.75, 1.0, 1.3, 2.0]  # the band's edges included
    seq = [0, 0, 1, 1, 1]
    torch.testing.assert_close(run("mask", ratios, seq).weight, run("tis", ratios, seq).weight)
    assert not run("mask", ratios, seq).dropped.any()


def test_mask_drops_every_token_when_all_are_out():
    c = run("mask", [0.1, 5.0, 100.0], [0, 0, 1])
    close(c.weight, [0.0] * 3)
    assert c.dropped.all()
    assert off_policy.whole_sequences(
        c.dropped, torch.ones(3, dtype=torch.bool), torch.tensor([0, 0, 1]), 2
    ).all()


def test_geo_reject_rejects_sequences_whose_geometric_mean_leaves_the_band():
    # geo means: 16^(1/3) = 2.52 (out), 0.9 (in), 1.2 (in, one token beyond C), sqrt(0.15) (out)
    ratios = [4.0, 4.0, 1.0, 0.9, 3.0, 0.48, 3.0, 0.05]
    seq = [0, 0, 0, 1, 2, 2, 3, 3]
    c = run("geo-reject", ratios, seq)
    geo = {s: math.prod(rs) ** (1 / len(rs)) for s, rs in by_seq(ratios, seq).items()}
    keep = {s: 1 / CAP <= g <= CAP for s, g in geo.items()}
    assert list(keep.values()) == [False, True, True, False]
    close(c.weight, [1.0 if keep[s] else 0.0 for s in seq])
    assert c.dropped.tolist() == [not keep[s] for s in seq]
    c = run("geo-reject", [3.0, 3.0, 0.2], [0, 0, 1])  # 3.0 and 0.2: both out
    assert c.dropped.all() and c.weight.sum() == 0
    real = torch.ones(3, dtype=torch.bool)
    assert off_policy.whole_sequences(c.dropped, real, torch.tensor([0, 0, 1]), 2).tolist() == [
        True,
        True,
    ]


def test_geo_reject_equals_tis_when_the_policies_agree():
    ratios, seq = [1.0] * 5, [0, 0, 1, 2, 2]
    torch.testing.assert_close(
        run("geo-reject", ratios, seq).weight, run("tis", ratios, seq).weight
    )


@pytest.mark.parametrize("mode", sorted(off_policy.OFF_POLICY))
def test_no_tokens_gives_no_weights(mode):
    c = off_policy.correct(mode, torch.zeros(0), torch.zeros(0, dtype=torch.long), 0, CAP)
    assert c.weight.shape == c.dropped.shape == c.capped.shape == (0,)


@pytest.mark.parametrize("mode", ["seq-tis", "geo-reject"])
def test_a_dummy_token_does_not_join_a_sequence(mode):
    """seq_index −1 (an idle rank's dummy micro-batch) is its own slot, not sequence 0's."""
    alone = run(mode, [1.5, 1.5], [0, 0])
    with_dummy = run(mode, [1.5, 1.5, 100.0], [0, 0, -1])
    torch.testing.assert_close(with_dummy.weight[:2], alone.weight)


def test_the_guard_drops_a_sequence_with_a_non_finite_log_prob_whole():
    seq = torch.tensor([0, 0, 1, 1, 2, -1])
    learner = torch.tensor([-1.0, float("nan"), -1.0, -1.0, -1.0, -1.0])
    behaviour = torch.tensor([-1.0, -1.0, -1.0, -1.0, float("-inf"), -1.0])
    keep, bad = off_policy.finite_sequences(seq, 3, learner, behaviour)
    assert keep.tolist() == [False, False, True, True, False, True]
    assert bad.tolist() == [True, False, True]


def test_use_tis_still_loads_as_off_policy_with_a_note():
    cfg = load_config(None, ["algorithm.use_tis=false"])
    assert cfg.algorithm.off_policy == "none"
    assert any('off_policy = "none"' in n and "use_tis" in n for n in cfg.notes())
    assert "use_tis" not in cfg.to_toml()  # one key only from here on
    cfg = load_config(None, ["algorithm.use_tis=true"])
    assert cfg.algorithm.off_policy == "tis" and cfg.notes()
    assert not load_config(None, ["algorithm.off_policy=mask"]).notes()
    with pytest.raises(ConfigError, match="delete use_tis"):
        load_config(None, ["algorithm.use_tis=false", "algorithm.off_policy=mask"])
    with pytest.raises(ConfigError, match="not true or false"):
        load_config(None, ["algorithm.use_tis=yes"])


def test_a_correction_without_recomputed_old_logprobs_is_an_error_that_says_what_to_set():
    with pytest.raises(ConfigError, match='off_policy = "none"'):
        load_config(None, ["learner.recompute_old_logprobs=false"])
    cfg = load_config(None, ["learner.recompute_old_logprobs=false", "algorithm.off_policy=none"])
    assert cfg.algorithm.off_policy == "none"
    with pytest.raises(ValueError, match="recompute_old_logprobs = true"):  # before any model load
        Learner("no-model-here", LearnerConfig(recompute_old_logprobs=False), AlgorithmConfig())


def test_an_old_runs_config_toml_with_use_tis_still_loads_for_resume(tmp_path):
    old = load_config(None, ["algorithm.off_policy=none"]).to_toml()
    old = old.replace('off_policy = "none"', "use_tis = false")  # what a run before wrote
    path = tmp_path / "config.toml"
    path.write_text(old)
    cfg = load_config(path)
    assert cfg.algorithm.off_policy == "none" and "use_tis" in cfg.notes()[0]
