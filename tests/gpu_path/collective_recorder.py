"""Test helper: record every torch.distributed collective a code path issues, and whether each
tensor it passes was made on the host without naming a device.

`record_collectives()` wraps the collectives of `torch.distributed` (in both namespaces torch's
own code calls them through) and runs a TorchFunctionMode that marks *host-made* tensors: those a
factory made with no `device=` (torch.zeros(n), torch.tensor(list), from_numpy, ...), those
`.cpu()` returned, and anything computed from them. `.to(device)` with an explicit device clears
the mark: the code placed the tensor on purpose. On the CUDA path a host-made tensor is a CPU
tensor, so a collective that gets one would meet NCCL with a CPU tensor; on a CPU run the mark
is what tells them apart from device tensors, since both live on the CPU there.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten
from torch.utils.weak import WeakIdKeyDictionary

TENSOR_COLLECTIVES = [
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_single",
    "all_gather_coalesced",
    "all_reduce_coalesced",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "reduce_scatter_single",
    "broadcast",
    "reduce",
    "gather",
    "scatter",
    "all_to_all",
    "all_to_all_single",
    "send",
    "recv",
    "isend",
    "irecv",
    "barrier",
]
OBJECT_COLLECTIVES = [
    "all_gather_object",
    "broadcast_object_list",
    "gather_object",
    "scatter_object_list",
    "send_object_list",
    "recv_object_list",
]
_FACTORIES = {
    torch.zeros,
    torch.ones,
    torch.empty,
    torch.full,
    torch.tensor,
    torch.arange,
    torch.as_tensor,
    torch.from_numpy,
    torch.frombuffer,
    torch.rand,
    torch.randn,
}


@dataclass
class Record:
    """One collective call: which, on what, over which backend."""

    op: str
    device: str  # device type of its first tensor ("" for a barrier)
    dtype: str
    backend: str  # the group's backend, e.g. "gloo" or "cpu:gloo,cuda:nccl"
    host_made: bool  # a tensor passed was made on the host without naming a device
    in_object_collective: bool  # issued by torch inside an *_object collective (pickled bytes)


class HostTaint(TorchFunctionMode):
    """Marks tensors made on the host without a device, and what is computed from them."""

    def __init__(self) -> None:
        super().__init__()
        self.marked = WeakIdKeyDictionary()

    def is_marked(self, t: torch.Tensor) -> bool:
        return t in self.marked

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = getattr(func, "__name__", "")
        inputs = [x for x in tree_flatten((args, kwargs))[0] if isinstance(x, torch.Tensor)]
        if func in _FACTORIES:
            mark = "device" not in kwargs
        elif name == "cpu":
            mark = True
        elif name == "to" and (
            "device" in kwargs or any(isinstance(a, (str, torch.device)) for a in args[1:])
        ):
            mark = False  # placed on purpose (on the CUDA path: a new tensor on the device)
        else:
            mark = any(self.is_marked(x) for x in inputs)
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor):
                continue
            if mark:
                self.marked[t] = True
            else:
                self.marked.pop(t, None)  # `.to(device)` may return its input itself
        return out


@contextmanager
def record_collectives() -> Iterator[list[Record]]:
    """Within the block, every collective is appended to the yielded list."""
    records: list[Record] = []
    taint = HostTaint()
    depth = {"object": 0}
    originals = {}

    def wrap_tensor_op(name, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            tensors = [x for x in tree_flatten((args, kwargs))[0] if isinstance(x, torch.Tensor)]
            group = kwargs.get("group")
            first = tensors[0] if tensors else None
            records.append(
                Record(
                    op=name,
                    device=first.device.type if first is not None else "",
                    dtype=str(first.dtype).removeprefix("torch.") if first is not None else "",
                    backend=str(dist.get_backend(group)),
                    host_made=any(taint.is_marked(t) for t in tensors),
                    in_object_collective=depth["object"] > 0,
                )
            )
            return fn(*args, **kwargs)

        return wrapper

    def wrap_object_op(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            depth["object"] += 1
            try:
                return fn(*args, **kwargs)
            finally:
                depth["object"] -= 1

        return wrapper

    for name in TENSOR_COLLECTIVES + OBJECT_COLLECTIVES:
        fn = getattr(c10d, name, None)
        if fn is None:
            continue
        originals[name] = fn
        new = wrap_tensor_op(name, fn) if name in TENSOR_COLLECTIVES else wrap_object_op(fn)
        setattr(c10d, name, new)
        setattr(dist, name, new)
    try:
        with taint:
            yield records
    finally:
        for name, fn in originals.items():
            setattr(c10d, name, fn)
            setattr(dist, name, fn)


def as_dicts(records: list[Record]) -> list[dict]:
    return [asdict(r) for r in records]
