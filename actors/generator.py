"""Generator actor: a vLLM async engine wired to the buffer (prompts in, groups out) and to the
learner (weights in). Thin: the loop is actors/generate_loop.py, the engine actors/engines/async_llm.py,
sampling helpers actors/sampling.py, the wire buffer/, its half of a weight update
actors/weights/follower.py (`WeightFollower`, the one field `weights`).

It streams (`streaming_loop`): up to `generator.max_inflight_prompts` groups are in flight at
once (admission control may lease fewer); a group is handed to the buffer the moment its G
responses finish and a new prompt is leased in its place. Code RL's response lengths are
long-tailed, so waves (one blocking engine call per batch of prompts) left the engine nearly
empty while the longest responses finished, and made weights wait a whole wave.

New weights are taken in flight (`maybe_update`, the follower's `poll`, every loop tick, asking the learner's version
at most every `generator.weight_poll_s`, and after a lease whose reply names a newer version
than the engine's): with `weight_update = "inflight"` the engine pauses
with its requests kept, loads, relabels, resets the prefix cache and resumes, so a response may
span two versions (its first and last are recorded; staleness counts from the first); with
"between_groups" it drains the requests in flight on the old weights first.

With a multi-turn environment (`environment.kind` other than "single") each group is its G
trajectories (actors/trajectory.py: one request of n=1 per turn on the conversation's exact
token ids, the environment's `step` off the loop, the next turn submitted as soon as the
feedback is in); the environment of each trajectory is built here with the problem read by id
from the run's problem store (`GeneratorSettings.store`) and the executor pool's sandbox
(actors/trajectory.py `MultiTurn`), and the engine's context grows to hold `environment.max_turns` turns.
"single" keeps the one request of n=G per group.

A failed update costs the groups in flight nothing: it is logged (the generator's `errors`, which
the launcher shows), counted (`sync_failures`) and retried at the next poll; after
`generator.max_failed_syncs` failures in a row the loop hands in its groups in flight and ends
with an error naming the peer, and the pool restarts it (actors/generate_loop.py). A load that failed
after it began leaves the engine's weights mixed (the worker loads bucket by bucket): the loop
ends at once (its groups in flight handed back to the buffer), and until a sync completes no
group is sampled (the follower's `mixed`: every later update failure ends the loop too).
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
import traceback
from typing import Any

from microcoder.actors.config import GeneratorSettings
from microcoder.actors.engines.adapters import served_adapter_config
from microcoder.actors.engines.async_llm import build_async_engine
from microcoder.actors.engines.build import WORKER_EXTENSION
from microcoder.actors.environments.base import environment_class
from microcoder.actors.generate_loop import caused_by, engine_dead, sample_group, streaming_loop
from microcoder.actors.logs import last_error_line, redirect_to_run_dir, replica_identity
from microcoder.actors.memory import EngineDeviceProbe, measure
from microcoder.actors.niceness import PriorityControl
from microcoder.actors.sampling import count_tokens, sampling_params
from microcoder.actors.timing import PoolTimer
from microcoder.actors.trajectory import MultiTurn, Versions, engine_context
from microcoder.actors.weights.follower import WeightFollower
from microcoder.buffer.client import BufferClient
from microcoder.data.prompting.render import PromptRenderer
from microcoder.device import resolve_device
from microcoder.evaluation.sampling import turn_views
from microcoder.learner.algorithm.diversity import batch_diversity
from microcoder.protocol import ActorMemory, PromptAssignment


class Generator(PriorityControl):
    """One generator replica (Ray actor body). `settings`: the sections it reads
    (actors/config.py); `learner0`: the Ray actor name of learner rank 0, the weight publisher
    (launch/run/learner_group.py `LearnerGroup.rank0_name`; None: no weight syncs). The generator
    looks rank 0 up by that name when it first asks for weights: a handle passed to the
    constructor would sit in Ray's object store, which Ray warns against for an actor it
    restarts (max_restarts, launch/run/cluster.py)."""

    def __init__(
        self,
        name: str,
        settings: GeneratorSettings,
        model_path: str,
        buffer_address: str | None,
        learner0: str | None = None,
    ):
        """`buffer_address` None: no buffer client (evaluation only: `sample_eval`, no `run`)."""
        from transformers import AutoTokenizer

        self.name = name
        self.settings = settings
        self.learner0 = learner0
        self.log_path = redirect_to_run_dir(name)
        self.device = resolve_device(settings.device)
        self.version = 0
        self.multi_turn = settings.environment.kind != "single"
        """Groups are trajectories of `environment.kind` (actors/trajectory.py), not one
        request of n=G."""
        if self.multi_turn:  # a kind that names nothing fails the start, before the engine
            environment_class(settings.environment.kind)
        context = engine_context(model_path, settings.generator, settings.environment)
        context_arg = {"max_model_len": context} if self.multi_turn else {}
        self._build_engine = lambda: build_async_engine(
            model_path,
            settings.generator,
            self.device,
            seed=settings.seed,
            rpc_timeout_s=settings.learner.sync_timeout_s,
            version=0,
            worker_extension_cls=WORKER_EXTENSION,
            config_overrides=settings.config_overrides,
            lora=settings.learner.lora,
            adapter_config=served_adapter_config(settings.learner.lora, model_path),
            **context_arg,
        )
        self.engine = self._build_engine()
        self.engine_rebuilds = 0
        """Times `ready()` replaced an engine that had died inside this live actor."""
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.renderer = PromptRenderer(
            self.tokenizer, settings.prompt, settings.chat_template_kwargs
        )
        self.client = (
            BufferClient.from_config(settings.buffer, buffer_address, owner=name)
            if buffer_address
            else None
        )
        self.temperature = settings.algorithm.temperature.initial
        self.timer = PoolTimer()
        self.tokens = 0
        self.groups = 0
        self.inflight = 0
        """Groups submitted to the engine and not finished yet."""
        self.syncs: list[dict[str, float]] = []
        self.pause_s: list[float] = []
        """Seconds the engine was paused for each weight update (pause to resume), newest last."""
        self.failed_prompts = 0
        """Prompts reported failed because the engine raised on them (see `_group_failed`)."""
        self.sync_failures = 0
        """Weight updates that failed (each logged in `errors`; the loop went on)."""
        self.errors: list[tuple[float, str]] = []
        """The newest generation errors: (unix time, message), at most 20."""
        self._stop = threading.Event()
        self._count_lock = threading.Lock()
        self._prompt_cache: dict[str, list[int]] = {}
        self.trajectories = (
            MultiTurn(name, settings, self.renderer, context) if self.multi_turn else None
        )
        """The multi-turn side: environments, problems by id, their sandbox (actors/trajectory.py)."""
        self._device_probe: EngineDeviceProbe | None = None  # `memory()` on CUDA
        self.weights = WeightFollower(self, learner0)
        """Its half of every weight update: when to poll, hold, and load (actors/weights/)."""

    # ------------------------------------------------------------ control (other threads)

    def ready(self) -> dict[str, Any]:
        """Ready to run: the engine serves. The pool supervisor asks before every (re)start of
        `run()`. An engine that died inside this live actor (its EngineCore ran out of memory, a
        watchdog aborted it, the model is one it cannot run) is replaced here by a new one, which
        syncs to the newest weights at its loop's first lease (version 0 until then); a new
        engine that cannot start raises its own error, which the pool reports."""
        why = self.engine.dead()
        if why:
            self._rebuild_engine(why)
        return {"name": self.name, "device": self.device, "version": self.version}

    def _rebuild_engine(self, why: str) -> None:
        root = engine_root_cause(self.log_path)
        print(
            f"{self.name}: its vLLM engine is dead ({why}; the engine's own error: "
            f"{root or 'none in this log'}); starting a new engine",
            file=sys.stderr,
            flush=True,
        )
        try:
            self.engine.shutdown()
        except Exception:
            pass

        def rebuild() -> None:  # new workers join again; its loop syncs first
            self.version = 0
            self.engine = self._build_engine()

        self.weights.restart(rebuild)
        self.engine_rebuilds += 1

    def stop(self) -> None:
        self._stop.set()

    def set_temperature(self, temperature: float) -> None:
        self.temperature = float(temperature)

    def memory(self) -> ActorMemory:
        """This replica's memory (actors/memory.py): RSS of the actor and its engine's processes
        (the EngineCore, and on CUDA its workers), the engine's KV-cache usage and, on CUDA, its
        workers' device figures (the newest answer: asking never waits on the engine)."""
        engine = self.engine
        figures: dict[str, int] = {}
        if self.device == "cuda":
            if self._device_probe is None or self._device_probe.engine is not engine:
                self._device_probe = EngineDeviceProbe(engine)
            figures = self._device_probe.figures() or {}
        gauge = getattr(engine, "kv_cache", None)
        return measure(self.name, "generator", kv_cache=gauge, device_figures=figures)

    def stats(self) -> dict[str, Any]:
        return {
            **replica_identity(self.name),
            "version": self.version,
            "temperature": self.temperature,
            "groups": self.groups,
            "tokens": self.tokens,
            "tokens_per_s": self.timer.per_busy_s(self.tokens),
            "inflight": self.inflight,
            "weight_update": self.settings.generator.weight_update,
            "pauses": len(self.pause_s),
            "pause_s_last": self.pause_s[-1] if self.pause_s else 0.0,
            "pause_s_p50": statistics.median(self.pause_s) if self.pause_s else 0.0,
            **self.timer.summary(),
            "last_sync": self.syncs[-1] if self.syncs else {},
            "failed_prompts": self.failed_prompts,
            "sync_failures": self.sync_failures,
            "engine_rebuilds": self.engine_rebuilds,
            "relay": self.weights.summary(),
            "errors": [list(e) for e in self.errors],
        }

    # ------------------------------------------------------------ the loop

    def run(self, max_groups: int | None = None, max_waves: int | None = None) -> dict[str, Any]:
        """Generate until stopped, the prompt source is exhausted, or `max_groups` groups
        (`max_waves`, for callers that counted waves: that many times max_inflight_prompts)."""
        if max_waves is not None:
            max_groups = max_waves * self.settings.generator.max_inflight_prompts
        try:
            return self._run(max_groups)
        except BaseException as err:
            traceback.print_exc()  # the cause, in this actor's log (the launcher names it too)
            sys.stderr.flush()
            why = self.engine.dead()
            if why or caused_by(err, engine_dead):
                # vLLM says only EngineDeadError here; its own error is in this actor's log
                raise EngineDiedError(
                    f"{self.name}: its vLLM engine died ({why or type(err).__name__}); the "
                    f"engine's own error: {engine_root_cause(self.log_path) or 'see the log'} "
                    f"(log {self.log_path or 'RUN_DIR/logs'})"
                ) from err
            raise

    def _run(self, max_groups: int | None) -> dict[str, Any]:
        streaming_loop(
            self.client,
            _Counted(self),
            capacity=self.settings.generator.max_inflight_prompts,
            params_for=lambda a: self._params(self.temperature),
            prompt_ids=self._prompt_ids,
            version=self._loop_version,
            maybe_update=self.maybe_update,
            after_lease=lambda: self.maybe_update(throttled=False),
            timer=self.timer,
            stop=self._stop,
            on_groups=self._count,
            on_error=self._group_failed,
            max_groups=max_groups,
            owner=self.name,
            max_failed_updates=self.settings.generator.max_failed_syncs,
            on_update_error=self._sync_failed,
            hold_leases=self.weights.under_way,
            group_task=self._trajectory_task if self.multi_turn else None,
        )
        return self.stats()

    # ------------------------------------------------------------ multi-turn groups

    def _trajectory_task(self, a: PromptAssignment, version: int):
        """The coroutine of one multi-turn group (actors/trajectory.py), on the engine's loop."""
        params = self._params(self.temperature)
        return self.trajectories.group(self.engine.llm, a, params, self._versions(version))

    def _versions(self, admitted: int) -> Versions:
        """This generator's version and its engine's salt and adapters, as a group sees them."""
        engine = self.engine
        return Versions(
            admitted=admitted,
            current=lambda: self.version,
            salt=lambda: engine.cache_salt,
            adapters=engine.adapters,
        )

    def _loop_version(self) -> int:
        """The version the loop sees: -1 while a failed load left the weights mixed, so that the
        loop asks rank 0 after its first lease whatever version the buffer names (it skips the
        ask when the lease's reply is not newer than this; no group is sampled while mixed)."""
        return -1 if self.weights.mixed else self.version

    def _sync_failed(self, err: BaseException, in_a_row: int) -> None:
        """A weight update failed and the loop goes on (actors/generate_loop.py): log and count it."""
        self.sync_failures += 1
        limit = self.settings.generator.max_failed_syncs
        self._error(
            err,
            f"weight update failed ({in_a_row} of {limit} in a row; retried at the "
            "next poll, the groups in flight go on)",
        )

    def _count(self, groups: list) -> None:
        self.tokens += count_tokens(groups)
        self.groups += len(groups)

    def _group_failed(self, a, err: BaseException) -> None:
        """The engine raised on one group (e.g. a prompt over the context): report it to the
        buffer as failed (counted; twice = quarantined) with the error; the loop goes on."""
        reason = f"generation failed: {type(err).__name__}: {str(err)[:300]}"
        self._error(err, f"prompt of problem {a.problem_id!r} failed")
        self.failed_prompts += 1
        try:
            self.client.fail_group(a.group_id, reason)
        except Exception as lost:  # e.g. the lease expired meanwhile: say so, go on
            print(f"{self.name}: could not report group {a.group_id}: {lost}", file=sys.stderr)

    def _error(self, err: BaseException, what: str) -> None:
        msg = f"{self.name}: {what}: {type(err).__name__}: {str(err).strip()[:500]}"
        print(msg, file=sys.stderr)
        traceback.print_exception(err)
        sys.stderr.flush()
        self.errors.append((time.time(), msg))
        del self.errors[:-20]

    def _params(self, temperature: float):
        g = self.settings.generator
        return sampling_params(
            group_size=self.settings.algorithm.group_size,
            temperature=temperature,
            max_tokens=g.max_response_tokens,
            ignore_eos=g.ignore_eos,
        )

    def _sample_coro(self, a, temperature: float):
        ids = self._prompt_ids(a.prompt)
        version = self.version
        params = self._params(temperature)
        return sample_group(
            self.engine.llm,
            a,
            ids,
            params,
            version,
            lambda: self.version,
            self.name,
            self.engine.cache_salt,
            adapters=self.engine.adapters,
        )

    def _submit(self, coro):
        """Submit a group task to the engine's loop, counted in `inflight` until it ends."""
        future = self.engine.submit(coro)
        with self._count_lock:
            self.inflight += 1
        future.add_done_callback(self._finished)
        return future

    def _finished(self, _future) -> None:  # on the loop thread
        with self._count_lock:
            self.inflight -= 1

    def _prompt_ids(self, prompt: str) -> list[int]:
        """Token ids of a prompt text rendered by the prompt layer (data/prompting/render.py)."""
        ids = self._prompt_cache.get(prompt)
        if ids is None:
            ids = self.renderer.encode_text(prompt)
            if len(self._prompt_cache) < 100_000:
                self._prompt_cache[prompt] = ids
        return ids

    # ------------------------------------------------------------ weights

    def maybe_update(self, throttled: bool = True) -> bool:
        """The loop's tick (`WeightFollower.poll`): at most every `generator.weight_poll_s`
        (every call when not `throttled`: right after a lease), take newer weights."""
        return self.weights.poll(throttled)

    def maybe_sync_weights(self) -> bool:
        """Take the learner's newest weights now if they are newer than ours (any thread);
        not while a held-out eval holds this version (hold_weights)."""
        return self.weights.sync_now()

    def hold_weights(self) -> int:
        """A run's held-out eval beside training (launch/run/eval_beside.py): take the learner's
        newest weights now, then keep them, taking no newer ones, until `release_weights`; the
        training loop goes on sampling on them meanwhile (its groups age, within the buffer's
        staleness bound). Returns the version held."""
        return self.weights.hold()

    def release_weights(self) -> None:
        """End `hold_weights`: the loop's next tick takes the newest weights."""
        self.weights.release()

    # ------------------------------------------------------------ probes

    def probe_diversity(self, prompts: list[str], temperature: float) -> float:
        """Diversity of G samples per probe prompt at `temperature` (temperature calibration)."""

        assignments = [
            PromptAssignment(group_id=-1 - i, problem_id="probe", prompt=p)
            for i, p in enumerate(prompts)
        ]
        with self._sampling():
            futures = [self._submit(self._sample_coro(a, temperature)) for a in assignments]
            groups = [f.result() for f in futures]
        return batch_diversity([[r.response_ids for r in g.responses] for g in groups])

    def greedy(self, prompts: list[str], max_tokens: int) -> list[list[int]]:
        """Greedy token ids for rendered `prompts` (used by tests to check weight sync)."""
        from vllm import SamplingParams

        params = SamplingParams(temperature=0, max_tokens=max_tokens)
        with self._sampling():
            outs = self.engine.generate(
                [{"prompt_token_ids": self._prompt_ids(p)} for p in prompts], params
            )
        return [list(o.outputs[0].token_ids) for o in outs]

    def sample_eval(
        self,
        prompt_texts: list[str],
        n: int | list[int],
        temperature: float,
        top_p: float,
        budgets: list[int],
    ) -> dict[str, Any]:
        """`microcoder eval` / a run's periodic eval: n samples per fully rendered prompt text at
        max_tokens = max(budgets), each also cut to every smaller budget
        (microcoder.evaluation.sampling). Returns {"version", "samples": [per prompt: [per
        sample: {"tokens", "finish_reason", "views": [per budget]}]]}. Syncs weights first only
        when this generator has a weight publisher (a training run)."""
        from microcoder.evaluation.sampling import sample_eval

        self.maybe_sync_weights()
        with self._sampling():
            samples = sample_eval(
                self.engine, self.tokenizer, prompt_texts, n, temperature, top_p, budgets
            )
        return {"version": self.version, "samples": samples}

    def sample_eval_turns(
        self,
        problems: list,
        n: int | list[int],
        temperature: float,
        top_p: float,
        max_tokens: int,
        max_turns: int,
    ) -> dict[str, Any]:
        """`microcoder eval --max-turns N`: `n` (or `n[i]`) trajectories per Problem, sampled by
        the training runner (actors/trajectory.py) in this generator's environment
        (`environment.kind`, set by the eval), each turn capped at `max_tokens`. Returns
        {"version", "samples": [per problem: [per trajectory: evaluation/sampling.py
        `turn_views`]]}: one view per turn 1..`max_turns`."""
        if self.trajectories is None:
            raise RuntimeError(
                f"{self.name}: environment.kind is 'single'; a multi-turn evaluation needs "
                "generators built with a multi-turn environment (launch/jobs/eval_command.py "
                "sets it for --max-turns)"
            )
        ns = [int(n)] * len(problems) if isinstance(n, int) else [int(x) for x in n]
        setup = self.trajectories.eval_setup(problems, max_turns)
        self.maybe_sync_weights()
        with self._sampling():
            futures = []
            for i, (p, k) in enumerate(zip(problems, ns, strict=True)):
                params = sampling_params(
                    group_size=k, temperature=temperature, max_tokens=max_tokens
                )
                params.top_p = top_p if temperature > 0 else 1.0
                a = PromptAssignment(group_id=-1 - i, problem_id=p.id, prompt="")
                coro = self.trajectories.group(
                    self.engine.llm, a, params, self._versions(self.version), setup
                )
                futures.append(self._submit(coro))
            groups = [f.result() for f in futures]
        samples = [[turn_views(r, max_tokens, max_turns) for r in g.responses] for g in groups]
        return {"version": self.version, "samples": samples}

    def _sampling(self):
        """The weight lock, for sampling outside the loop. A relay round a tick said this
        generator is ready for is received first: rank 0 put it in the round's chain, and the
        members after it would lose the round if it did not receive."""
        return self.weights.sampling()

    def shutdown(self) -> None:
        """Stop the loop, return held leases, leave the weight relay, and shut the engine down
        (its EngineCore exits)."""
        self.stop()
        self.weights.leave()  # out of the relay's next epoch, answered
        if self.client is not None:
            self.client.release_and_close()
        try:
            self.engine.shutdown()
        except Exception:
            pass


class _Counted:
    """The engine as `streaming_loop` sees it (`llm`, `cache_salt`, `submit`), with every task
    counted in the generator's `inflight`."""

    def __init__(self, gen: Generator):
        self.gen = gen
        self.llm = gen.engine.llm

    @property
    def cache_salt(self) -> str:
        """The engine's salt now (it changes at an update that keeps the KV)."""
        return self.gen.engine.cache_salt

    def submit(self, coro):
        return self.gen._submit(coro)


class EngineDiedError(RuntimeError):
    """The generator's vLLM engine died; the message carries the engine's own error (from the
    actor's log, where its EngineCore printed it)."""


def engine_root_cause(log_path: str | None) -> str:
    """The engine's own error: the last exception line of the actor's log other than the
    EngineDeadError / EngineDiedError that only say the engine is gone."""

    return last_error_line(log_path, skip=("EngineDeadError", "EngineDiedError"))
