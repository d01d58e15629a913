"""Offload (`learner.offload`): what of a learner rank's training state lives in host memory.

- "none": fp32 master shards, their gradients and AdamW's moments on the compute device.
- "optimizer": AdamW's moments (exp_avg, exp_avg_sq: 8 B per parameter of the rank's shard)
  live in host memory, pinned on CUDA. `StreamedAdamW.step` streams them to the device in
  buckets of at most `BUCKET_BYTES` of moments, runs torch's own AdamW step on the bucket there,
  and streams them back (non_blocking copies on one stream, one synchronize per step).
  Masters and gradients stay on the device.
- "params": the fp32 master shards, their gradients and the moments live in host memory:
  FSDP2's own `CPUOffloadPolicy` (pinned on CUDA) copies each layer's shard to the device for
  its all-gather and each reduced gradient back; the optimizer (plain AdamW) steps on the host.

"Host memory" is `torch.device("cpu")`; "the device" is the device of each parameter's shard.
On a CPU learner they are the same memory, and the streamed step still takes the CUDA path:
every move is an explicit copy into a separately allocated buffer (`torch.empty` + `copy_`,
never `.to()`, which would return the same tensor when the devices are equal), so the moments
AdamW reads on the "device" are temporaries and the host buffers persist between steps. Only
pinning and the synchronize are CUDA's alone. `StreamedAdamW.streamed` counts the bytes moved
each way, which is how the tests prove on CPU that the stream path ran.

Same weights, bit for bit: each bucket is stepped by torch's AdamW itself (`super().step()` on a
param group holding only the bucket), whose arithmetic is elementwise, so splitting the
parameters into buckets changes no bit. A checkpoint is the same either way: the optimizer's
state holds the same DTensors (their local tensor on the host), so DCP saves and loads them
with `get_optimizer_state_dict` / `set_optimizer_state_dict` like any others, and a run
resumes into another offload mode.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import torch
from torch.distributed.fsdp import CPUOffloadPolicy, FSDPModule
from torch.distributed.tensor import DTensor

HOST = torch.device("cpu")
"""Where offloaded state lives."""

BUCKET_BYTES = 512 * 2**20
"""Moments (exp_avg + exp_avg_sq) streamed to the device per AdamW bucket: the device's
temporary during the streamed step is at most this much, or one parameter's moments when they
are larger, plus torch's AdamW temporaries for the bucket (one more moment-sized buffer)."""

MODES = ("none", "optimizer", "params")


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if hasattr(t, "to_local") else t


def _like(template: torch.Tensor, local: torch.Tensor) -> torch.Tensor:
    """`local` as a tensor of `template`'s kind: a DTensor with its mesh and placements, or
    itself for a plain tensor."""

    if not isinstance(template, DTensor):
        return local
    return DTensor.from_local(
        local,
        template.device_mesh,
        template.placements,
        run_check=False,
        shape=template.shape,
        stride=template.stride(),
    )


def _copy_to(src: torch.Tensor, device: torch.device, pin: bool = False) -> torch.Tensor:
    """A new buffer on `device` holding `src` (always a copy, even when `src` is there already);
    `pin`: page-locked host memory, which CUDA copies asynchronously."""
    dst = torch.empty(src.shape, dtype=src.dtype, device=device, pin_memory=pin)
    dst.copy_(src, non_blocking=True)
    return dst


@dataclass
class Streamed:
    """Bytes the streamed step moved: host -> device and device -> host, and buckets stepped."""

    to_device: int = 0
    to_host: int = 0
    buckets: int = 0


class StreamedAdamW(torch.optim.AdamW):
    """torch's AdamW whose moment tensors live in host memory between steps (offload =
    "optimizer"); see the module docstring. The state dict and checkpoints are AdamW's."""

    def __init__(self, params, *, bucket_bytes: int | None = None, **kwargs) -> None:
        super().__init__(params, **kwargs)
        self.bucket_bytes = bucket_bytes or BUCKET_BYTES
        self.streamed = Streamed()
        self._host_buffers: set[int] = set()  # addresses of the host buffers allocated here

    def _new_host_buffer(self, src: torch.Tensor, device: torch.device) -> torch.Tensor:
        h = _copy_to(src, HOST, pin=device.type == "cuda")
        self._host_buffers.add(h.data_ptr())
        return h

    def host_resident(self) -> bool:
        """Every moment in the state is a host buffer this optimizer allocated (pinned when its
        parameter is on CUDA), none is a device tensor: on a CPU learner, where the device is
        the host too, this is what tells them apart."""
        for p, state in self.state.items():
            pin = _local(p).device.type == "cuda"
            for key in self._moment_keys(p):
                h = _local(state[key])
                if h.device != HOST or h.data_ptr() not in self._host_buffers:
                    return False
                if pin and h.numel() and not h.is_pinned():  # an empty shard has no pages
                    return False
        return True

    def _buckets(self, params: list[torch.Tensor]) -> Iterator[list[torch.Tensor]]:
        """The parameters with a gradient, in order, in runs of at most `bucket_bytes` of fp32
        moments (8 B per local element); a larger parameter is a bucket of its own."""
        bucket = []
        size = 0
        for p in params:
            if p.grad is None:
                continue
            n = 8 * _local(p).numel()
            if bucket and size + n > self.bucket_bytes:
                yield bucket
                bucket = []
                size = 0
            bucket.append(p)
            size += n
        if bucket:
            yield bucket

    def _moment_keys(self, p: torch.Tensor) -> list[str]:
        return [k for k, v in self.state[p].items() if k != "step" and torch.is_tensor(v)]

    def _to_device(self, bucket: list[torch.Tensor]) -> dict:
        """Replace each moment of `bucket` in the state by a device copy; return the host
        buffers, to copy the result back into."""
        host = {}
        for p in bucket:
            device = _local(p).device
            for key in self._moment_keys(p):
                h = _local(self.state[p][key])
                self.state[p][key] = _like(p, _copy_to(h, device))
                self.streamed.to_device += h.numel() * h.element_size()
                host[(p, key)] = h
        return host

    def _to_host(self, bucket: list[torch.Tensor], host: dict) -> None:
        """Copy each moment of `bucket` back into its host buffer (a new, pinned-on-CUDA one on
        the first step, when AdamW has just created the moments on the device) and put the host
        buffer back into the state."""
        for p in bucket:
            device = _local(p).device
            for key in self._moment_keys(p):
                d = _local(self.state[p][key])
                h = host.get((p, key))
                if h is None:
                    h = self._new_host_buffer(d, device)
                else:
                    h.copy_(d, non_blocking=True)
                self.state[p][key] = _like(p, h)
                self.streamed.to_host += d.numel() * d.element_size()

    @torch.no_grad()
    def step(self, closure=None):
        """AdamW's step, one bucket of parameters at a time, the bucket's moments on the device
        for its step only. Returns None (a closure is refused: the learner never passes one)."""
        if closure is not None:
            raise ValueError("StreamedAdamW.step takes no closure; compute the loss before it")
        groups = self.param_groups
        devices = set()
        try:
            for group in groups:
                for bucket in self._buckets(group["params"]):
                    self.param_groups = [{**group, "params": bucket}]
                    host = self._to_device(bucket)
                    super().step()
                    self._to_host(bucket, host)
                    self.streamed.buckets += 1
                    devices |= {_local(p).device for p in bucket}
        finally:
            self.param_groups = groups
        for device in devices:  # the host buffers are complete before anyone reads them
            if device.type != "cpu":
                torch.accelerator.synchronize(device)
        return None

    def load_state_dict(self, state_dict) -> None:
        """AdamW's load (which puts every moment on its parameter's device), then each moment
        copied into a new host buffer: a checkpoint saved with any offload mode loads here."""
        super().load_state_dict(state_dict)
        self._host_buffers.clear()
        for p, state in self.state.items():
            device = _local(p).device
            for key in self._moment_keys(p):
                state[key] = _like(p, self._new_host_buffer(_local(state[key]), device))
        for device in {_local(p).device for p in self.state}:
            if device.type != "cpu":
                torch.accelerator.synchronize(device)


def adamw(params: Iterable[torch.Tensor], offload: str, **kwargs) -> torch.optim.AdamW:
    """The learner's AdamW for `learner.offload`: StreamedAdamW for "optimizer", torch's AdamW
    otherwise (with "params" the parameters are on the host already, so it steps there)."""
    if offload not in MODES:
        raise ValueError(f"learner.offload = {offload!r}; set it to one of {', '.join(MODES)}")
    cls = StreamedAdamW if offload == "optimizer" else torch.optim.AdamW
    return cls(params, **kwargs)


def fully_shard_kwargs(offload: str, device: torch.device) -> dict:
    """Extra `fully_shard` arguments for `learner.offload`: FSDP2's CPU offload policy for
    "params" (pinned host memory on CUDA), nothing otherwise."""
    if offload != "params":
        return {}

    return {"offload_policy": CPUOffloadPolicy(pin_memory=device.type == "cuda")}


def params_offloaded(model: torch.nn.Module) -> bool:
    """Every FSDP2-managed parameter of `model` is kept on the host by FSDP2's CPU offload (its
    shard and its gradient live in host memory; FSDP2 copies them to the device and back)."""

    params = []
    for m in model.modules():
        if isinstance(m, FSDPModule):
            group = m._get_fsdp_state()._fsdp_param_group  # FSDP2's own record of its params
            params += group.fsdp_params if group is not None else []
    return bool(params) and all(
        fp.offload_to_cpu and _local(fp.sharded_param).device == HOST for fp in params
    )


def check_params_on_host(model: torch.nn.Module) -> None:
    """Raise unless every parameter shard of `model` lives in host memory (offload = "params",
    after `to_empty`)."""
    away = [n for n, p in model.named_parameters() if _local(p).device != HOST]
    if away or not params_offloaded(model):
        raise RuntimeError(
            f"learner.offload = 'params' left {len(away)} parameter shards off the host "
            f"({', '.join(away[:3])}); FSDP2 moves them only with pin_memory on CUDA: "
            "build the model through load_sharded_policy(offload='params')"
        )


def to_mesh_device(t: torch.Tensor) -> torch.Tensor:
    """A DTensor whose shard is in host memory (offload = "params") as one on its mesh's device
    (a copy), so its all-gather runs there (NCCL on CUDA); anything else as it is."""

    if isinstance(t, DTensor) and t.device.type != t.device_mesh.device_type:
        return t.to(t.device_mesh.device_type)
    return t


def resident_bytes(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict:
    """This rank's training state by where its offload mode keeps it: {"masters", "grads",
    "moments"} -> ("host" or "device", bytes). Gradients are counted at the masters' size (what
    they hold from the backward to the step); moments are the optimizer's current state (none
    before the first step). Read from the live objects, not the config."""
    on_host = params_offloaded(model)
    masters = sum(_local(p).numel() * _local(p).element_size() for p in model.parameters())
    moments = sum(
        _local(v).numel() * _local(v).element_size()
        for state in optimizer.state.values()
        for k, v in state.items()
        if k != "step" and torch.is_tensor(v)
    )
    streamed = isinstance(optimizer, StreamedAdamW) and optimizer.host_resident()
    place = "host" if on_host else "device"
    return {
        "masters": (place, masters),
        "grads": (place, masters),
        "moments": ("host" if on_host or streamed else "device", moments),
    }
