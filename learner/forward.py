"""The policy's forward for training: the log-probs of a micro-batch's targets (moved out of
learner/trainer.py: `Learner._logp` calls `target_logprobs`)."""

from __future__ import annotations

import torch

from microcoder.learner import attention
from microcoder.learner.algorithm import grpo
from microcoder.learner.packing import MicroBatch
from microcoder.learner.sequence_parallel import KWARG


def model_inputs(mb: MicroBatch, attn: str, device: torch.device, sp=None) -> dict:
    """The model's keyword inputs for `mb`: packed (sequence boundaries for varlen attention) or
    padded rows (an attention mask). `sp`: this rank's learner/sequence_parallel.py layout, given
    to the attention when it splits the row (`mb` is then this rank's slice)."""
    if mb.packed:
        cu = mb.cu_seq_lens
        inputs = dict(
            input_ids=mb.input_ids,
            position_ids=mb.position_ids,
            cu_seq_lens_q=cu,
            cu_seq_lens_k=cu,
            max_length_q=mb.max_len,
            max_length_k=mb.max_len,
        )
        if attn == attention.NAME:  # boundaries from the host: no sync in the layers
            inputs["varlen"] = attention.plan(mb.seq_lens, device)
        if sp is not None and sp.size > 1:
            inputs[KWARG] = sp
        return inputs
    mask = (mb.position_ids > 0) | (torch.arange(mb.input_ids.shape[1], device=device) == 0)
    return dict(input_ids=mb.input_ids, attention_mask=mask.long(), position_ids=mb.position_ids)


def target_logprobs(
    model: torch.nn.Module,
    mb: MicroBatch,
    attn: str,
    device: torch.device,
    chunk: int,
    head_transform: tuple[float, float | None],
    sp=None,
) -> tuple[torch.Tensor, torch.Tensor]:  # ([n] log-probs, [n] entropy)
    """Log-probs of the targets at their sampling temperature, and the entropy (detached).

    With `chunk` (learner.logprob_chunk_tokens) > 0 the model runs only to its final hidden
    states and the head runs chunk by chunk (grpo.chunked_token_logprobs); 0 = the head on every
    position at once, [n, V] logits. `head_transform`: the model's (scale, softcap). `sp`: the
    sequence-parallel layout (`mb` is this rank's slice; its n targets are the slice's).
    """
    inputs = model_inputs(mb, attn, device, sp)
    if chunk > 0:
        hidden = final_hidden_states(model, inputs).flatten(0, 1)[mb.logit_index]  # [n, H]
        head = model.get_output_embeddings()
        scale, softcap = head_transform
        return grpo.chunked_token_logprobs(
            hidden, head.weight, mb.targets, mb.temperature, chunk, head.bias, scale, softcap
        )
    if mb.packed:
        logits = model(**inputs, logits_to_keep=mb.logit_index).logits[0]  # [n, V]
    else:
        logits = model(**inputs).logits.flatten(0, 1)[mb.logit_index]  # [n, V]
    return grpo.token_logprobs(logits, mb.targets, mb.temperature)


def final_hidden_states(model: torch.nn.Module, inputs: dict) -> torch.Tensor:  # [R, L, H]
    """The body's last (normed) hidden states from one forward of the whole model.

    The call goes through the root module, so FSDP2's hooks gather the root's parameters (which
    it keeps unsharded after the forward: the head can be applied to these states afterwards)
    and reduce their gradients after backward. The head itself runs on one position only
    (`logits_to_keep=1`); a forward hook on the body keeps its output.
    """
    kept: list[torch.Tensor] = []
    hook = model.get_decoder().register_forward_hook(
        lambda _m, _args, out: kept.append(out.last_hidden_state)
    )
    try:
        model(**inputs, logits_to_keep=1)
    finally:
        hook.remove()
    return kept[0]
