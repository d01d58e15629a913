"""`microcoder model check DIR --sequence-parallel 2`: the learner's log-probs with each packed
row split over 2 spawned gloo ranks equal transformers' forward (fp32, 1e-5) for every supported
family (sliding windows of 8 and soft-caps crossing the split: the 23 + 17 seeded tokens split at
20; one key/value head, so the SP attention repeats it for 2 ranks); a model whose attention
heads the ranks cannot share is refused with the reason."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from family_models import FAMILY_ARCH, build_family

from microcoder.learner.models import logprob_check as lc
from microcoder.learner.models.families import FAMILIES
from microcoder.learner.models.sp_check import sp_logprobs

TEMPERATURE = 0.7


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("sp-families")
    return {f: build_family(f, root / f) for f in FAMILY_ARCH}


@pytest.mark.slow  # one spawn of 2 ranks running 12 learners (~60 s on 2 shared cores)
def test_sp2_logprobs_equal_transformers_for_every_supported_family(folders):
    assert set(folders) == set(FAMILIES)
    seqs = lc.seeded_sequences(300)
    got = sp_logprobs(list(folders.values()), seqs, TEMPERATURE, 2)
    diffs = {
        (family, name): lc.max_abs_diff(logp, lc.reference_logprobs(d, seqs, TEMPERATURE))
        for family, d in folders.items()
        for name, logp in got[str(d)].items()
    }
    assert len(diffs) == 2 * len(FAMILIES)
    assert max(diffs.values()) <= 1e-5, diffs


def _check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "microcoder", "model", "check", *args, "--no-vllm", "--json"],
        capture_output=True,
        text=True,
    )


@pytest.mark.slow  # one model check with its 2 spawned ranks (~45 s)
def test_model_check_with_sequence_parallel_2_reports_the_split_logprobs(folders):
    res = _check(str(folders["gemma2"]), "--sequence-parallel", "2")
    assert res.returncode == 0, res.stdout + res.stderr
    report = json.loads(res.stdout)
    diffs = report["logprobs"]["max_abs_diff"]
    assert {"sp2 unchunked", "sp2 chunked"} <= diffs.keys()
    assert max(diffs.values()) <= 1e-5 and report["ok"]


def test_model_check_refuses_a_split_the_attention_heads_cannot_take(folders):
    res = _check(str(folders["qwen2"]), "--sequence-parallel", "4")  # 2 attention heads
    assert res.returncode == 1, res.stdout + res.stderr
    report = json.loads(res.stdout)
    (why,) = report["sequence_parallel"]["errors"]
    assert "does not divide the model's 2 attention heads" in why
    assert not report["ok"]
