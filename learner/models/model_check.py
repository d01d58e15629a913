"""`microcoder model check DIR`: will this model train here, and correctly?

For a model folder: its family (learner/models/families.py: supported, or refused with why); the
learner's own log-probs (packed micro-batch of two seeded sequences, chunked and unchunked)
against transformers' forward (learner/models/logprob_check.py); the names and shapes the learner
publishes (what vLLM's reload and the saved folder get) against the checkpoint's; whether
that published state round-trips through `AutoModelForCausalLM.from_pretrained`; and, where
vLLM is importable, whether an engine that loads the published state through the project's
reload path generates transformers' greedy tokens (actors/engines/vllm_check.py, passed in as `vllm`
by launch/cli/cmd_model.py: the learner does not import actors/).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path

from safetensors import safe_open
from safetensors.torch import save_file

from microcoder.learner.config import AlgorithmConfig, LearnerConfig
from microcoder.learner.models.config_overrides import overrides_dict
from microcoder.learner.models.families import family_errors, read_config
from microcoder.learner.models.sp_check import sp_logprobs

TOLERANCE = 1e-5
"""Largest |learner − transformers| log-prob accepted (fp32)."""

CHUNK = 7
"""Chunk size of the chunked check: several uneven chunks over the 40 seeded tokens."""


def check_model(
    model_dir: str | Path,
    temperature: float = 1.0,
    seed: int = 0,
    dump: str | Path | None = None,
    vllm: Callable[..., dict] | None = None,
    config_overrides: dict | None = None,
    sequence_parallel: int = 1,
) -> dict:
    """The report (JSON-able; `ok` says whether everything passed); with `dump`, writes the
    chunked learner's log-probs of the seeded sequences there (see `dump_logprobs`). `vllm`:
    the vLLM stage, called as vllm(model_dir, config, published state, device, seed) and
    returning {"status": "ok" | "failed" | "skipped", "reason", ...}
    (actors/engines/vllm_check.py: vllm_stage); None = reported skipped (--no-vllm).
    `config_overrides` (model.config_overrides, `--config-override`) change the model's config
    for every stage: the learner, transformers' reference and vLLM (as its hf_overrides).
    `sequence_parallel` N > 1: also the log-probs with the row split over N spawned gloo ranks
    (learner/models/sp_check.py), or the reasons the model cannot run so."""
    import torch

    from microcoder.learner.models import logprob_check as lc
    from microcoder.learner.sequence_parallel import model_errors

    model_dir = Path(model_dir)
    overrides = dict(config_overrides or {})
    config = overrides_dict(read_config(model_dir), overrides)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    errors = family_errors(config)  # the learner's; vLLM's CPU limits are the vLLM stage's
    report: dict = {
        "model": str(model_dir),
        "model_type": config.get("model_type"),
        "config_overrides": overrides,
        "family": {"supported": not errors, "errors": errors},
    }
    if errors:
        report["ok"] = False
        return report
    learners = _learners(model_dir, overrides)
    seqs = lc.seeded_sequences(int(config["vocab_size"]), seed)
    want = lc.reference_logprobs(model_dir, seqs, temperature, overrides)
    got = {name: lc.learner_logprobs(ln, seqs, temperature) for name, ln in learners.items()}
    sp_errors = model_errors(config, sequence_parallel)
    if sequence_parallel > 1 and not sp_errors:
        sp_got = sp_logprobs([model_dir], seqs, temperature, sequence_parallel, overrides)
        sp_got = sp_got[str(model_dir)]
        got |= {f"sp{sequence_parallel} {name}": v for name, v in sp_got.items()}
    diffs = {name: lc.max_abs_diff(v, want) for name, v in got.items()}
    report["logprobs"] = {"max_abs_diff": diffs, "tolerance": TOLERANCE}
    report["sequence_parallel"] = {"size": sequence_parallel, "errors": sp_errors}
    if dump is not None:
        dump_logprobs(dump, seqs, got["chunked"], temperature)
        report["logprobs"]["dumped"] = str(dump)
    published = learners["unchunked"].full_state_dict(masters=True)
    report["names"] = compare_names(published, checkpoint_shapes(model_dir))
    report["round_trip"] = round_trip(model_dir, published)
    if vllm is not None:
        extra = {"config_overrides": overrides} if overrides else {}
        report["vllm"] = vllm(model_dir, config, published, device, seed, **extra)
    else:
        report["vllm"] = {"status": "skipped", "reason": "--no-vllm"}
    report["ok"] = (
        max(diffs.values()) <= TOLERANCE
        and not sp_errors
        and report["names"]["match"]
        and report["round_trip"]["max_abs_diff"] == 0.0
        and report["vllm"]["status"] != "failed"
    )
    return report


def _learners(model_dir: Path, overrides: dict) -> dict:
    from microcoder.learner.trainer import Learner

    return {
        name: Learner(
            model_dir,
            LearnerConfig(logprob_chunk_tokens=chunk, packing=True, micro_batch_tokens=4096),
            AlgorithmConfig(),
            config_overrides=overrides,
        )
        for name, chunk in (("unchunked", 0), ("chunked", CHUNK))
    }


def dump_logprobs(path, sequences, logprobs, temperature: float) -> None:
    """JSON {"temperature": T, "sequences": [{"input_ids": [...], "logprobs": [...]}]}, where
    logprobs[i] = log p(input_ids[i+1] | input_ids[0..i]) at T."""
    rows = [{"input_ids": s, "logprobs": lp} for s, lp in zip(sequences, logprobs, strict=True)]
    Path(path).write_text(json.dumps({"temperature": temperature, "sequences": rows}))


def checkpoint_shapes(model_dir: Path) -> dict[str, list[int]]:
    out = {}
    for file in sorted(model_dir.glob("*.safetensors")):
        with safe_open(file, framework="pt") as f:
            out |= {k: list(f.get_slice(k).get_shape()) for k in f.keys()}
    return out


def compare_names(published: dict, checkpoint: dict[str, list[int]]) -> dict:
    """Published names/shapes against the checkpoint's. A tied head published under both names
    while the checkpoint holds one is no mismatch."""
    shapes = {k: list(v.shape) for k, v in published.items()}
    missing = sorted(set(checkpoint) - set(shapes))
    extra = sorted(k for k in set(shapes) - set(checkpoint) if k != "lm_head.weight")
    wrong = sorted(k for k in set(shapes) & set(checkpoint) if shapes[k] != checkpoint[k])
    return {
        "match": not (missing or extra or wrong),
        "missing": missing,
        "extra": extra,
        "shape_mismatch": wrong,
        "count": len(checkpoint),
    }


def round_trip(model_dir: Path, published: dict) -> dict:
    """Save the published state with the folder's config.json, load both with from_pretrained;
    the largest |difference| of any parameter (0.0 = exact)."""
    import torch
    from transformers import AutoModelForCausalLM

    with tempfile.TemporaryDirectory(prefix="microcoder-check-") as tmp:
        tensors = {k: v.contiguous() for k, v in published.items()}
        if "lm_head.weight" in tensors and tensors["lm_head.weight"] is tensors.get(
            "model.embed_tokens.weight"
        ):
            del tensors["lm_head.weight"]  # safetensors refuses shared memory; a tie reloads it
        save_file(tensors, Path(tmp) / "model.safetensors")
        (Path(tmp) / "config.json").write_text((model_dir / "config.json").read_text())
        again = AutoModelForCausalLM.from_pretrained(tmp, dtype=torch.float32).state_dict()
    original = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).state_dict()
    if again.keys() != original.keys():
        return {"max_abs_diff": float("inf"), "keys_differ": True}
    worst = max((again[k] - t).abs().max().item() for k, t in original.items() if t.numel())
    return {"max_abs_diff": worst, "keys_differ": False}


def format_report(report: dict) -> str:
    """The report as lines for a terminal."""
    lines = [f"model {report['model']} (model_type {report['model_type']})"]
    if report.get("config_overrides"):
        lines.append(f"config overrides: {json.dumps(report['config_overrides'])}")
    fam = report["family"]
    lines.append("family: supported" if fam["supported"] else "family: REFUSED")
    lines += [f"  {e}" for e in fam["errors"]]
    if "logprobs" in report:
        lp = report["logprobs"]
        for name, d in lp["max_abs_diff"].items():
            verdict = "ok" if d <= lp["tolerance"] else "MISMATCH"
            lines.append(f"log-probs vs transformers ({name}): max |diff| {d:.2e} {verdict}")
        n = report["names"]
        lines.append(
            f"published names: {'match' if n['match'] else 'MISMATCH'} ({n['count']} tensors)"
            + "".join(f"\n  {k}: {n[k]}" for k in ("missing", "extra", "shape_mismatch") if n[k])
        )
        sp_errors = report.get("sequence_parallel", {}).get("errors", [])
        lines += [f"sequence parallelism: REFUSED: {e}" for e in sp_errors]
        rt = report["round_trip"]["max_abs_diff"]
        lines.append(f"from_pretrained round trip: max |diff| {rt:.2e}")
    if "vllm" in report:
        lines.append(format_vllm(report["vllm"]))
    lines.append("OK" if report["ok"] else "NOT OK")
    return "\n".join(lines)


def format_vllm(stage: dict) -> str:
    """The vLLM stage as terminal lines."""
    status = stage["status"]
    if status == "skipped":
        return f"vLLM greedy vs transformers: skipped: {stage['reason']}"
    if "after" not in stage:
        return f"vLLM greedy vs transformers: FAILED: {stage['reason']}"
    head = (
        f"vLLM greedy vs transformers: {'equal' if stage['greedy_equal'] else 'DIFFER'} "
        f"({len(stage['after'])} prompts x {len(stage['after'][0])} tokens; engine on dummy "
        f"weights, {stage['tensors_loaded']} tensors loaded through the reload path; engine "
        f"start {stage['engine_start_s']} s, reload {stage['reload_s']} s)"
    )
    if stage["greedy_equal"]:
        return head
    return (
        head + f"\n  engine:       {stage['after']}\n  transformers: {stage['transformers_greedy']}"
    )
