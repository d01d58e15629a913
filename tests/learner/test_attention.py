"""The varlen attention kernel: a packed row gives the same logits as separate sequences."""

from __future__ import annotations

import torch
from transformers import AutoModelForCausalLM

from microcoder.learner import attention


def test_packed_forward_equals_separate_forwards(small_model):
    model = AutoModelForCausalLM.from_pretrained(
        small_model, attn_implementation=attention.register()
    )
    ref = AutoModelForCausalLM.from_pretrained(small_model, attn_implementation="eager")
    a, b = torch.randint(0, 250, (7,)), torch.randint(0, 250, (5,))
    cu = torch.tensor([0, 7, 12], dtype=torch.int32)
    pos = torch.cat([torch.arange(7), torch.arange(5)]).unsqueeze(0)
    with torch.no_grad():
        packed = model(
            input_ids=torch.cat([a, b])[None], position_ids=pos, cu_seq_lens_q=cu
        ).logits[0]
        sep = torch.cat([ref(input_ids=a[None]).logits[0], ref(input_ids=b[None]).logits[0]])
    torch.testing.assert_close(packed, sep, atol=1e-5, rtol=1e-5)


def test_right_padded_rows_match_unpadded(small_model):
    model = AutoModelForCausalLM.from_pretrained(
        small_model, attn_implementation=attention.register()
    )
    a = torch.randint(0, 250, (5,))
    padded = torch.cat([a, torch.zeros(3, dtype=torch.long)])[None]
    with torch.no_grad():
        out = model(input_ids=padded).logits[0, :5]
        ref = model(input_ids=a[None]).logits[0]
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


def test_auto_on_cpu_picks_the_varlen_kernel():
    assert attention.choose("auto", torch.device("cpu")) == attention.NAME
