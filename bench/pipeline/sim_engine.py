"""A simulated AsyncEngine for `microcoder bench pipeline`'s SimGenerator: a benchmark
instrument, not product code. It has what actors/generate_loop.py's `streaming_loop` and
`sample_group` use of actors/engines/async_llm.py's AsyncEngine (`submit`, `llm.generate`, the
version label), so the bench runs the product's streaming loop; only the engine is simulated.

The engine is serial: one group at a time holds it for `per_group_s` (FIFO), so a generator's
throughput is exactly 1 / per_group_s groups/s whenever it has a group in flight, the same cost
model as the blocking waves it replaces (a wave of k prompts slept k x per_group_s), and the
pipeline's ideal bound stays well defined. Each group's responses are `response_tokens` tiny
tokens whose weight_versions spans carry the label at the group's start and at its end (two
spans when the label changed meanwhile, as vLLM reports an in-flight update). No vLLM import.
"""

from __future__ import annotations

import asyncio
import enum
import threading
from dataclasses import dataclass, replace
from types import SimpleNamespace


class OutputKind(enum.Enum):
    """Stands in for vllm.sampling_params.RequestOutputKind (sample_group reads FINAL_ONLY)."""

    CUMULATIVE = 0
    DELTA = 1
    FINAL_ONLY = 2


@dataclass
class SimParams:
    """The SamplingParams fields sample_group and the engine read."""

    n: int
    temperature: float = 1.0
    output_kind: OutputKind = OutputKind.CUMULATIVE

    def clone(self) -> SimParams:
        return replace(self)


class _SimLLM:
    def __init__(self, per_group_s: float, response_tokens: int) -> None:
        self.per_group_s = per_group_s
        self.response_tokens = response_tokens
        self.label = "0"
        self._lock: asyncio.Lock | None = None

    async def generate(self, prompt: dict, params: SimParams, request_id: str, lora_request=None):
        """One group: wait for the engine, hold it `per_group_s`, yield the final output
        (`lora_request` as vLLM's AsyncLLM takes it; the simulation serves no adapter)."""
        self._lock = self._lock or asyncio.Lock()
        async with self._lock:
            first = self.label
            await asyncio.sleep(self.per_group_s)
            last = self.label
        t = self.response_tokens
        spans = [SimpleNamespace(version=first, start=0, end=t)]
        if last != first:
            half = t // 2
            spans = [
                SimpleNamespace(version=first, start=0, end=half),
                SimpleNamespace(version=last, start=half, end=t),
            ]
        logprob = SimpleNamespace(logprob=-1.0)
        completion = SimpleNamespace(
            token_ids=[7] * t,
            logprobs=[{7: logprob}] * t,
            text="",
            finish_reason="stop",
            weight_versions=spans,
        )
        yield SimpleNamespace(request_id=request_id, outputs=[completion] * params.n)


class SimEngine:
    """The AsyncEngine surface streaming_loop needs, on an event-loop thread of its own."""

    def __init__(self, per_group_s: float, response_tokens: int = 16) -> None:
        self.llm = _SimLLM(per_group_s, response_tokens)
        self.cache_salt = None
        """No prefix cache to keep apart (AsyncEngine.cache_salt)."""
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def submit(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def set_version(self, v: int) -> None:
        """The label put on groups from now on (a plain str write, read on the loop)."""
        self.llm.label = str(int(v))

    def shutdown(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5.0)
