"""The non-finite log-prob guard (issue 35): a response whose behaviour log-prob is NaN or
infinite is dropped at intake, counted and logged with its generator and policy version, and the
step trains on the rest; a sequence whose learner log-prob is not finite never reaches the loss.
And a real step's mismatch metrics: non-zero, broken down by staleness.

One in-process rank on CPU (a gloo world of 1), the small model of conftest.py."""

from __future__ import annotations

import dataclasses
import logging
import math

import numpy as np
import torch
from learner_groups import mixed_groups

from microcoder.learner.config import AlgorithmConfig, LearnerConfig
from microcoder.learner.intake import drop_nonfinite, sample_group_arrays
from microcoder.learner.sample import SampleGroup, TrainSample
from microcoder.learner.trainer import Learner


def with_logprob(gs: list[SampleGroup], value: float, k: int = 0, i: int = 1) -> list[SampleGroup]:
    """`gs` with response i of group k's second behaviour log-prob set to `value`."""
    s = gs[k].samples[i]
    logp = list(s.behaviour_logprobs)
    logp[1] = value
    bad = TrainSample(s.prompt_ids, s.response_ids, logp, s.temperature, s.reward, False, "WA", 0)
    samples = [bad if j == i else x for j, x in enumerate(gs[k].samples)]
    return [SampleGroup(g.group_id, samples) if n == k else g for n, g in enumerate(gs)]


def without(gs: list[SampleGroup], k: int = 0, i: int = 1) -> list[SampleGroup]:
    samples = [x for j, x in enumerate(gs[k].samples) if j != i]
    return [SampleGroup(g.group_id, samples) if n == k else g for n, g in enumerate(gs)]


def make_learner(model) -> Learner:
    return Learner(
        model,
        LearnerConfig(lr=1e-3, micro_batch_tokens=512),
        AlgorithmConfig(truncation_mask="none"),
        seed=0,
    )


def params(learner: Learner) -> dict[str, torch.Tensor]:
    return {n: p.to_local().clone() for n, p in learner.model.named_parameters()}


def test_intake_drops_the_response_and_names_its_generator_and_version(caplog):
    arrays = [
        sample_group_arrays(g, k) for k, g in enumerate(with_logprob(mixed_groups(0), -math.inf))
    ]
    arrays[0] = arrays[0].__class__(**{**vars(arrays[0]), "generator": "generator-3"})
    lone = sample_group_arrays(SampleGroup("x", [mixed_groups(1)[0].samples[0]]), 7)
    lone.logprobs[0][0] = np.nan
    with caplog.at_level(logging.WARNING):
        kept, dropped, emptied = drop_nonfinite([*arrays, lone])
    assert [len(g.response_ids) for g in kept] == [3, 4] and emptied == [7]
    assert [(d.group_id, d.index, d.token) for d in dropped] == [(0, 1, 1), (7, 0, 0)]
    assert "generator generator-3, policy version 0" in caplog.text and "-inf" in caplog.text
    # the kept responses are the others, every field cut alike
    assert kept[0].rewards.tolist() == [0.0, 0.0, 1.0]
    assert [len(r) for r in kept[0].response_ids] == [len(x) for x in kept[0].logprobs]


def test_a_nan_behaviour_log_prob_is_dropped_and_counted_and_the_step_trains(small_model):
    learner, control = make_learner(small_model), make_learner(small_model)
    before = params(learner)
    m = learner.train_step(with_logprob(mixed_groups(0), math.nan))
    assert m["nonfinite_dropped"] == 1.0 and m["responses"] == 7
    assert m["update_skipped"] == 0.0 and math.isfinite(m["grad_norm"])
    assert math.isfinite(m["loss"]) and math.isfinite(m["is_weight_mean"])
    after = params(learner)
    assert any(not torch.equal(after[n], before[n]) for n in before)
    # exactly the step on the batch without that response
    c = control.train_step(without(mixed_groups(0)))
    assert c["nonfinite_dropped"] == 0.0
    assert all(torch.equal(after[n], t) for n, t in params(control).items())


def test_a_step_measures_the_mismatch_by_staleness(small_model):
    learner = make_learner(small_model)
    m = learner.train_step(mixed_groups(0))
    # the behaviour log-probs here are made up: the learner's differ from them
    assert m["mismatch_abs_dlogp"] > 0 and m["mismatch_kl"] > 0
    assert m["mismatch_ratio_p1"] <= m["mismatch_ratio_p50"] <= m["mismatch_ratio_p99"]
    assert set(m["mismatch_by_staleness"]) == {"0"}
    assert 0 <= m["mismatch_out_of_band_frac"] <= 1
    m = learner.train_step(
        mixed_groups(1, versions=(0, 1))
    )  # learner version 1 now: staleness 1 and 0
    by = m["mismatch_by_staleness"]
    assert set(by) == {"0", "1"}
    assert by["0"]["tokens"] + by["1"]["tokens"] == sum(
        len(s.response_ids) for g in mixed_groups(1) for s in g.samples
    )


def test_a_non_finite_learner_log_prob_never_reaches_the_loss(small_model):
    """A temperature so small that logits / T overflow: the learner's log-probs of that response
    are NaN. The sequence is dropped from the loss and counted; the loss stays finite."""
    learner = make_learner(small_model)
    m = learner.train_step(mixed_groups(0, temperature=1e-44))
    assert m["nonfinite_learner_dropped"] == 1.0
    assert math.isfinite(m["loss"]) and math.isfinite(m["mismatch_kl"])
    assert m["responses"] == 8
    # Its gradient is NaN all the same (backward through the NaN row of log_softmax): the step
    # guard skips that update (learner.max_skipped_steps), as docs/architecture.md says.
    assert m["update_skipped"] == 1.0


def test_a_step_splits_the_mismatch_of_responses_an_update_split(small_model):
    """Responses whose last version is newer than their first (an in-flight update split them)
    are counted under mismatch_by_span "spanned", the others under "single"."""
    learner = make_learner(small_model)
    groups = mixed_groups(0)
    split = {(0, 1), (1, 3)}  # (group, response) sampled across the update 0 -> 1
    groups = [
        SampleGroup(
            g.group_id,
            [
                dataclasses.replace(s, last_policy_version=1) if (k, i) in split else s
                for i, s in enumerate(g.samples)
            ],
        )
        for k, g in enumerate(groups)
    ]
    m = learner.train_step(groups)
    by = m["mismatch_by_span"]
    tokens = {
        name: sum(
            len(s.response_ids)
            for k, g in enumerate(groups)
            for i, s in enumerate(g.samples)
            if ((k, i) in split) == (name == "spanned")
        )
        for name in ("single", "spanned")
    }
    assert {name: row["tokens"] for name, row in by.items()} == tokens
    assert all(row["kl"] > 0 and row["abs_dlogp"] > 0 for row in by.values())
    assert m["mixed_version_frac"] == 2 / 8
