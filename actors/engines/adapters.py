"""LoRA adapters a running engine serves, one per policy version (issue 47, `learner.lora`).

Under LoRA the learner trains an adapter on frozen base weights and a weight sync sends the
adapter only. The engine (vLLM built with `enable_lora`, `lora_engine_kwargs`) keeps the base
model and serves each version's adapter under its own name and id (`adapter_request`: name
f"v{version}", id version + 1). `AdapterSet` is the engine's table of them:

- `add(version, folder)` registers a received adapter folder with vLLM (`AsyncLLM.add_lora`);
  from then on `acquire()` hands the newest to each new request;
- a request holds the adapter it started with to its end (`acquire` ... `release`), so a
  response never mixes versions and its staleness tag is its adapter's version; a sync needs no
  pause, no prefix-cache reset and no KV floor (vLLM keys cached blocks by adapter too);
- the set keeps the newest `keep` versions (`learner.lora.versions_kept`); an older one is
  removed from vLLM (`remove_lora`) and its folder deleted only once no request uses it.

Before the first adapter arrives the engine serves the base model, version 0 (an adapter
starts with B = 0, so the base is version 0's policy): `acquire` returns None then.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
"""The `max_lora_rank` values vLLM 0.32 accepts (vllm/config/lora.py `MaxLoRARanks`)."""


def served_lora_rank(rank: int) -> int:
    """The smallest `max_lora_rank` vLLM accepts that holds an adapter of `rank`; raises
    naming the limit when `rank` is above vLLM's largest."""
    for allowed in VLLM_LORA_RANKS:
        if rank <= allowed:
            return allowed
    raise ValueError(
        f"learner.lora.rank {rank} is above vLLM's largest max_lora_rank "
        f"{VLLM_LORA_RANKS[-1]}: the generators could not serve the adapter; use a smaller rank"
    )


def lora_engine_kwargs(rank: int, versions_kept: int) -> dict[str, Any]:
    """vLLM engine arguments for serving `versions_kept` adapter versions of `rank` at once:
    `max_loras` slots in a batch (a request running on an older version and new ones on the
    newest share a batch), and room for one more on the engine's CPU side, where the newest
    is added before an older one is removed."""
    return {
        "enable_lora": True,
        "max_lora_rank": served_lora_rank(rank),
        "max_loras": versions_kept,
        "max_cpu_loras": versions_kept + 1,
    }


def adapter_request(version: int, folder: str):
    """vLLM's LoRARequest for `version`'s adapter in `folder`: name f"v{version}", id version
    + 1 (vLLM ids start at 1)."""
    from vllm.lora.request import LoRARequest

    return LoRARequest(f"v{version}", version + 1, str(folder))


@dataclass
class Lease:
    """A request's hold on one adapter version (`AdapterSet.acquire`)."""

    version: int
    request: Any
    """vLLM's LoRARequest, passed with the request (`lora_request=`)."""


class AdapterSet:
    """The adapter versions an `AsyncEngine` (actors/engines/async_llm.py) serves.

    `engine`: the AsyncEngine (its `llm` is the AsyncLLM, its `submit`/`_call` run coroutines
    on its loop). `keep`: versions kept (`learner.lora.versions_kept`). `config`: the
    adapter_config.json every folder gets (PEFT's). `root`: where the folders are written
    (None: a temporary folder of this process, deleted by `close`)."""

    def __init__(self, engine, keep: int, config: dict[str, Any], root: str | None = None):
        if keep < 1:
            raise ValueError(f"learner.lora.versions_kept is {keep}: keep at least 1")
        self.engine = engine
        self.keep = keep
        self.config = dict(config)
        self.root = Path(root or tempfile.mkdtemp(prefix="mc-adapters-"))
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.served: dict[int, Lease] = {}
        """Adapter versions registered with vLLM, by version."""
        self.users: dict[int, int] = {}
        """Requests running on each version."""
        self.removed: list[int] = []
        """Versions removed from vLLM, oldest first (for tests and stats)."""

    def new_folder(self) -> str:
        """An empty folder for the next adapter a worker writes (`mc_receive_adapter`)."""
        return tempfile.mkdtemp(prefix="round-", dir=self.root)

    def newest(self) -> int | None:
        with self._lock:
            return max(self.served) if self.served else None

    def add(self, version: int, folder: str) -> None:
        """Register `version`'s adapter in `folder` with vLLM (blocking, the engine's RPC
        deadline); new requests take it from now on. Then drops what `keep` no longer covers."""
        lease = Lease(version, adapter_request(version, folder))
        ok = self.engine.call(self.engine.llm.add_lora(lease.request), f"add_lora(v{version})")
        if not ok:
            raise RuntimeError(f"vLLM refused adapter v{version} in {folder} (add_lora: False)")
        with self._lock:
            self.served[version] = lease
        self.engine.call(self._prune(), "remove_lora")

    def acquire(self) -> Lease | None:
        """The newest adapter, held for one request until `release`; None before the first."""
        with self._lock:
            if not self.served:
                return None
            lease = self.served[max(self.served)]
            self.users[lease.version] = self.users.get(lease.version, 0) + 1
            return lease

    def release(self, lease: Lease | None) -> None:
        """A request that held `lease` ended (finished, failed or cancelled). Its version is
        removed now if the set no longer keeps it (on the engine's loop, not waited for)."""
        if lease is None:
            return
        with self._lock:
            left = self.users.get(lease.version, 0) - 1
            if left > 0:
                self.users[lease.version] = left
            else:
                self.users.pop(lease.version, None)
            stale = left <= 0 and lease.version in self._dropped_locked()
        if stale:
            self.engine.submit(self._prune())

    def _dropped_locked(self) -> list[int]:
        """Versions past the newest `keep` that no request uses (hold the lock)."""
        old = sorted(self.served)[: -self.keep]
        return [v for v in old if not self.users.get(v)]

    async def _prune(self) -> list[int]:
        """Remove from vLLM the versions `_dropped_locked` names and delete their folders."""
        with self._lock:
            dropped = self._dropped_locked()
            leases = [self.served.pop(v) for v in dropped]
        for lease in leases:
            await self.engine.llm.remove_lora(lease.request.lora_int_id)
            shutil.rmtree(lease.request.lora_path, ignore_errors=True)
            self.removed.append(lease.version)
        return dropped

    async def listed(self) -> set[int]:
        """vLLM's own list of the adapter ids it holds (for tests)."""
        return set(await self.engine.llm.list_loras())

    def close(self) -> None:
        """Delete every folder (the engine is gone or going)."""
        shutil.rmtree(self.root, ignore_errors=True)


def engine_lora(lora_cfg) -> dict[str, Any]:
    """Engine arguments for `learner.lora` (None: none)."""
    if lora_cfg is None:
        return {}
    return lora_engine_kwargs(int(lora_cfg.rank), int(lora_cfg.versions_kept))


def served_adapter_config(lora_cfg, model_path) -> dict[str, Any] | None:
    """adapter_config.json of the run's adapter on `model_path` (learner/lora/adapters.py
    `adapter_config`, the same the learner's checkpoints write); None without `learner.lora`."""
    if lora_cfg is None:
        return None
    from microcoder.learner.lora import adapter_config

    return adapter_config(lora_cfg, str(model_path))
