"""What to change when a learner rank does not fit: the knobs that would actually help, each
checked against the plan (learner/models/memory_plan.py) before it is named.

Never a `learner.micro_batch_tokens` below the run's longest sequence: packing gives such a
sequence a bin of its own (learner/packing.py), so a smaller budget does not shrink it. For
long sequences the knobs are `learner.sequence_parallel` (a rank holds 1/N of a micro-batch's
tokens), `learner.offload` (the states to host memory) and `learner.world_size` (more ranks
share the states), with activation checkpointing on.
"""

from __future__ import annotations

from microcoder.learner.models.memory_plan import ModelShape, largest_fitting, plan_learner


def sp_choices(shape: ModelShape, inputs: dict) -> list[int]:
    """Sequence-parallel sizes above the current one that this learner can take: dividing the
    ranks of a replica and the model's attention heads (learner/sequence_parallel.py repeats
    key/value heads that N does not divide)."""
    shard = inputs["world_size"] // max(1, inputs.get("replicas", 1))
    now = inputs.get("sequence_parallel", 1)
    return [n for n in range(now + 1, shard + 1) if shard % n == 0 and shape.heads % n == 0]


def _world(shape: ModelShape, inputs: dict, gpu_bytes: int) -> int:
    """The smallest world_size, a multiple of replicas × sequence_parallel, that fits whole GPUs."""
    unit = max(1, inputs.get("replicas", 1)) * max(1, inputs.get("sequence_parallel", 1))
    world = largest_fitting("world_size", gpu_bytes, shape, 4096, **inputs)
    return -(-world // unit) * unit if world else 0


def learner_knob(shape: ModelShape, inputs: dict, room: int, gpu_bytes: int) -> str:
    """What to change so the learner rank fits in `room` bytes (more ranks: whole GPUs of
    `gpu_bytes` each), as a sentence naming every single change that fits."""

    def fits(**change) -> bool:
        return plan_learner(shape, **{**inputs, **change}).peak() <= room

    if not inputs["activation_checkpointing"] and fits(activation_checkpointing=True):
        return "set learner.activation_checkpointing = true"
    on = {**inputs, "activation_checkpointing": True}
    ckpt = (
        ""
        if inputs["activation_checkpointing"]
        else "with learner.activation_checkpointing = true: "
    )
    options: list[str] = []
    longest = inputs.get("longest_sequence", 0)
    if inputs["micro_batch_tokens"] > longest:
        tokens = largest_fitting(
            "micro_batch_tokens", room, shape, inputs["micro_batch_tokens"], **on
        )
        if tokens >= max(1024, longest):
            options.append(f"lower learner.micro_batch_tokens to {tokens}")
    if on.get("kernel", "flash") != "flash" and fits(**on | {"kernel": "flash"}):
        options.append(
            "install flash-attn on the learner's GPUs (pip install microcoder[flash]; the "
            "dry-run: --flash-attn), which keeps no [L, L] attention scores"
        )
    if inputs["logprob_chunk_tokens"] == 0 and fits(**on | {"logprob_chunk_tokens": 1024}):
        options.append("set learner.logprob_chunk_tokens = 1024")
    sp = next((n for n in sp_choices(shape, on) if fits(**on | {"sequence_parallel": n})), 0)
    if sp:
        options.append(f"set learner.sequence_parallel = {sp}")
    levels = ("none", "optimizer", "params")
    now = levels.index(inputs.get("offload", "none"))
    off = next((o for o in levels[now + 1 :] if fits(**on | {"offload": o})), "")
    if off:
        options.append(f'set learner.offload = "{off}" (host memory: see the plan\'s host line)')
    world = _world(shape, on, gpu_bytes)
    if world > inputs["world_size"]:
        options.append(
            f"raise learner.world_size to {world} (with learner.gpus_per_rank = 1): the fp32 "
            "weights, gradients and AdamW moments need 16 bytes per parameter, shared by the ranks"
        )
    if not options:
        most = {**on, "offload": "params"}
        sps = sp_choices(shape, most)
        if sps:
            most["sequence_parallel"] = sps[-1]
        if plan_learner(shape, **most).peak() <= room:
            sp_part = f"learner.sequence_parallel = {sps[-1]} and " if sps else ""
            options.append(f'set {sp_part}learner.offload = "params"')
        elif (world := _world(shape, most, gpu_bytes)) > inputs["world_size"]:
            options.append(
                f'raise learner.world_size to {world} with learner.offload = "params"'
                + (f" and learner.sequence_parallel = {most['sequence_parallel']}" if sps else "")
            )
    if not options:
        return "the model does not fit on any number of these GPUs; use GPUs with more memory"
    return ckpt + " or ".join(options)
