"""LoRA on the learner (learner/lora/adapters.py): adapter names and folder as PEFT's own, checked
against peft's get_peft_model / PeftModel.from_pretrained as the independent reference."""

from __future__ import annotations

import json
import shutil
import typing
from pathlib import Path

import pytest
import torch

from microcoder.learner.config import VLLM_LORA_RANKS, LearnerConfig, LoraConfig
from microcoder.learner.lora import (
    adapter_config,
    adapter_state_dict,
    apply_lora,
    base_state_dict,
    init_adapters,
    merged_state_dict,
    write_adapter_folder,
)

CFG = LoraConfig(rank=8, alpha=16, targets=["q_proj", "v_proj", "down_proj"])


def _trained_lora_model(path):
    """The HF model at `path` with adapters, B made non-zero (as after training)."""
    from transformers import AutoModelForCausalLM

    model = apply_lora(AutoModelForCausalLM.from_pretrained(path), CFG)
    init_adapters(model, seed=3)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".lora_B." in name:
                p.normal_(0, 0.05, generator=torch.Generator().manual_seed(len(name)))
    return model


def test_only_adapters_are_trainable_and_named_as_peft_saves_them(small_model):
    import peft
    from transformers import AutoModelForCausalLM

    model = _trained_lora_model(small_model)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all(".lora_A." in n or ".lora_B." in n for n in trainable)
    reference = peft.get_peft_model(
        AutoModelForCausalLM.from_pretrained(small_model),
        peft.LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj", "down_proj"]),
    )
    ours = adapter_state_dict(model)
    theirs = peft.get_peft_model_state_dict(reference)
    assert set(ours) == set(theirs)
    assert all(ours[k].shape == theirs[k].shape for k in ours)


def test_adapter_folder_loads_in_peft_and_merged_weights_give_the_same_logits(
    small_model, tmp_path
):
    import peft
    from transformers import AutoModelForCausalLM

    model = _trained_lora_model(small_model).eval()
    ids = torch.tensor([[1, 5, 9, 17, 30, 2]])
    with torch.no_grad():
        want = model(ids).logits
    folder = write_adapter_folder(
        adapter_state_dict(model), adapter_config(CFG, str(small_model)), tmp_path / "adapter"
    )
    config = json.loads((folder / "adapter_config.json").read_text())
    assert config["r"] == 8 and config["peft_type"] == "LORA"
    loaded = peft.PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(small_model), folder
    ).eval()
    with torch.no_grad():
        got = loaded(ids).logits
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
    base = AutoModelForCausalLM.from_pretrained(small_model)
    merged = merged_state_dict(base_state_dict(model.state_dict()), adapter_state_dict(model), CFG)
    base.load_state_dict(merged)
    with torch.no_grad():
        assert not torch.allclose(
            base.eval()(ids).logits, AutoModelForCausalLM.from_pretrained(small_model)(ids).logits
        )
        torch.testing.assert_close(base(ids).logits, want, rtol=0, atol=1e-4)


def test_the_ranks_are_the_installed_vllms_and_others_are_refused():
    from vllm.config.lora import MaxLoRARanks

    assert tuple(typing.get_args(MaxLoRARanks)) == VLLM_LORA_RANKS
    with pytest.raises(ValueError, match="not a rank vLLM serves"):
        LearnerConfig(lora={"rank": 12})
    with pytest.raises(ValueError, match="choose among"):
        LearnerConfig(lora={"targets": ["lm_head"]})
    assert LearnerConfig().lora is None
    with pytest.raises(ValueError, match="does not carry LoRA adapters"):
        LearnerConfig(lora={"rank": 8}, weight_transport="relay")


def _groups(step: int):
    from train_worker import synthetic_groups

    return synthetic_groups(step)


def _lora_learner(path, **learner):
    from microcoder.learner.config import AlgorithmConfig
    from microcoder.learner.trainer import Learner

    cfg = LearnerConfig(
        lr=1e-2, micro_batch_tokens=4096, grad_clip=100.0, lora={"rank": 8}, **learner
    )
    return Learner(path, cfg, AlgorithmConfig(rho=0.5), seed=3)


def test_only_adapters_get_gradients_in_the_learner_and_the_base_stays_frozen(small_model):
    from safetensors.torch import load_file

    learner = _lora_learner(small_model, dtype="bfloat16")
    ids = torch.tensor([[1, 5, 9, 17, 30, 2, 4, 8]])
    learner.model(input_ids=ids).logits.float().pow(2).mean().backward()
    with_grad = {n for n, p in learner.model.named_parameters() if p.grad is not None}
    adapters = {n for n, p in learner.model.named_parameters() if ".lora_" in n}
    assert with_grad == adapters and len(adapters) == 2 * 7 * 2  # A and B, 7 targets, 2 layers
    assert all(
        p.dtype == (torch.float32 if ".lora_" in n else torch.bfloat16)
        for n, p in learner.model.named_parameters()
    )
    state = learner.optimizer.state_dict()
    assert len(state["param_groups"][0]["params"]) == len(adapters)
    learner.optimizer.zero_grad(set_to_none=True)
    learner.train_step(_groups(0))
    base = learner.base_state_dict()
    original = load_file(small_model / "model.safetensors")
    assert set(base) == set(original)
    assert all(torch.equal(base[k], original[k].to(torch.bfloat16)) for k in base)
    adapter = adapter_state_dict(learner.model)
    assert all(t.abs().sum() > 0 for k, t in adapter.items() if ".lora_B." in k)  # trained
    published = learner.full_state_dict()  # what a whole-model sync sends: the merged policy
    assert published.keys() == base.keys()
    merged = merged_state_dict(base, adapter, learner.cfg.lora)
    assert all(torch.equal(published[k], merged[k]) for k in base)
    assert not torch.equal(
        published["model.layers.0.self_attn.q_proj.weight"],
        base["model.layers.0.self_attn.q_proj.weight"],
    )


def test_resume_restores_adapter_and_optimizer_and_the_next_loss(small_model, tmp_path):
    from microcoder.learner.config import AlgorithmConfig
    from microcoder.learner.trainer import Learner

    first = _lora_learner(small_model)
    first.train_step(_groups(0))
    ckpt = first.save_checkpoint(tmp_path / "step_1")
    assert (ckpt / "adapter" / "adapter_model.safetensors").is_file()
    resumed = Learner.from_checkpoint(ckpt, first.cfg, AlgorithmConfig(rho=0.5), seed=3)
    want = adapter_state_dict(first.model)
    got = adapter_state_dict(resumed.model)
    assert want.keys() == got.keys() and all(torch.equal(want[k], got[k]) for k in want)
    s1 = first.optimizer.state_dict()["state"]
    s2 = resumed.optimizer.state_dict()["state"]
    assert s1.keys() == s2.keys() and len(s1) == len(want)
    for k in s1:
        for field in ("step", "exp_avg", "exp_avg_sq"):
            a, b = s1[k][field], s2[k][field]
            a = a.full_tensor() if hasattr(a, "full_tensor") else a
            b = b.full_tensor() if hasattr(b, "full_tensor") else b
            assert torch.equal(a, b), (k, field)
    loss_first = first.train_step(_groups(1))["loss"]
    loss_resumed = resumed.train_step(_groups(1))["loss"]
    assert loss_resumed == loss_first


@pytest.mark.slow
def test_two_fsdp_ranks_train_the_adapters_as_one_rank_does(small_model, tmp_path):
    """FSDP2 with frozen and trainable parameters in one layer group: the adapters' gradients
    are reduced over ranks (2 gloo ranks end where 1 does), the frozen base is untouched."""
    from learner_ranks import spawn_ranks
    from safetensors.torch import load_file

    worker = str(Path(__file__).with_name("train_worker.py"))
    extra = json.dumps({"learner": {"lora": {"rank": 8}}})
    result = {}
    for world in (1, 2):
        out = tmp_path / f"w{world}"
        out.mkdir()
        spawn_ranks(world, [worker, str(small_model), str(out), "train", "4096", extra])
        result[world] = load_file(out / "weights.safetensors")
    one, two = result[1], result[2]
    assert one.keys() == two.keys()
    adapters = [k for k in one if ".lora_" in k]
    assert adapters and any(one[k].abs().sum() > 0 for k in adapters if ".lora_B." in k)
    for k in one:
        torch.testing.assert_close(two[k], one[k], rtol=1e-5, atol=1e-6)
    original = load_file(small_model / "model.safetensors")
    assert all(torch.equal(one[k], original[k]) for k in original)


@pytest.fixture(scope="module")
def lora_run(small_model, tmp_path_factory):
    """A run folder with one LoRA checkpoint after one step, the learner's logits on IDS."""
    learner = _lora_learner(small_model)
    learner.train_step(_groups(0))
    run_dir = tmp_path_factory.mktemp("lora-run")
    ckpt = learner.save_checkpoint(run_dir / "checkpoints" / "step_1")
    (ckpt / "COMPLETE").write_text("1")
    with torch.no_grad():
        logits = learner.model(input_ids=IDS).logits.float()
    return run_dir, logits


IDS = torch.tensor([[1, 5, 9, 17, 30, 2, 4, 8, 40, 3]])


def test_export_merge_writes_a_model_folder_with_the_training_models_logits(lora_run, tmp_path):
    from transformers import AutoModelForCausalLM

    from microcoder.launch.cli.main import main

    run_dir, want = lora_run
    out = tmp_path / "merged"
    assert main(["export", str(run_dir), "--out", str(out), "--dtype", "fp32", "--merge"]) == 0
    assert not (out / "adapter_config.json").exists()
    model = AutoModelForCausalLM.from_pretrained(out).eval()
    with torch.no_grad():
        got = model(IDS).logits
    torch.testing.assert_close(got, want, rtol=0, atol=2e-5)


def test_export_without_merge_writes_the_adapter_folder_peft_loads_on_the_base(
    lora_run, small_model, tmp_path, capsys
):
    import peft
    from transformers import AutoModelForCausalLM

    from microcoder.launch.cli.main import main

    run_dir, want = lora_run
    out = tmp_path / "adapter"
    assert main(["export", str(run_dir), "--out", str(out), "--dtype", "fp32"]) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "adapter_config.json",
        "adapter_model.safetensors",
    ]
    base = AutoModelForCausalLM.from_pretrained(small_model)
    with torch.no_grad():
        plain = base(IDS).logits
        got = peft.PeftModel.from_pretrained(base, out).eval()(IDS).logits
    assert (plain - want).abs().max() > 1e-3  # the adapter changed the model
    torch.testing.assert_close(got, want, rtol=0, atol=2e-5)
    full = tmp_path / "full-run"  # a checkpoint without an adapter: a full fine-tuning one
    shutil.copytree(run_dir / "checkpoints" / "step_1", full)
    shutil.rmtree(full / "adapter")
    assert main(["export", str(full), "--out", str(tmp_path / "x"), "--merge"]) == 2
    assert "not a LoRA checkpoint" in capsys.readouterr().err


def test_lora_with_the_base_offloaded_to_the_host_trains_the_same_adapters(small_model):
    """learner.offload = "params" (the one-GPU recipe's): FSDP2's CPU offload holds the frozen
    bf16 base beside the fp32 adapters; one step ends where the learner without offload does."""
    want = _lora_learner(small_model, dtype="bfloat16")
    got = _lora_learner(small_model, dtype="bfloat16", offload="params")
    for learner in (want, got):
        learner.train_step(_groups(0))
    a, b = adapter_state_dict(want.model), adapter_state_dict(got.model)
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(b[k], a[k], rtol=1e-5, atol=1e-6)
    base, offloaded = want.base_state_dict(), got.base_state_dict()
    assert base.keys() == offloaded.keys()
    assert all(torch.equal(base[k], offloaded[k]) for k in base)


def test_a_misspelt_lora_key_gets_the_nearest_one():
    from microcoder.config import ConfigError
    from microcoder.launch.config import load_config

    with pytest.raises(ConfigError, match="did you mean 'learner.lora.rank'"):
        load_config(
            Path(__file__).parents[2] / "configs" / "tiny-cpu.toml", ["learner.lora.rnak=8"]
        )
