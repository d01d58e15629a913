"""Generator actor: a vLLM engine wired to the buffer (prompts in, groups out) and to the learner
(weights in). Thin: sampling is actors/rollout.py, the wire is buffer/, the weights path is
actors/weight_sync.py.

Loop (`generation_loop`): lease up to `max_inflight_prompts` prompts (admission control may give
fewer or none) -> sync weights if the learner has a newer version -> sample G responses for each
in one engine call -> hand the groups to the buffer. Weight updates are applied only between
waves, so every response of a wave is sampled by one policy version and tagged with it exactly;
a wave of the tiny model takes well under a second, so the learner's new weights wait at most
that long. (The alternative, aborting in-flight requests and re-queueing their prompts, wastes
finished tokens and buys nothing with waves this short.)
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from microcoder.actors.config import GeneratorSettings
from microcoder.actors.rollout import count_tokens, sample_groups
from microcoder.actors.timing import PoolTimer


class Generator:
    """One generator replica (Ray actor body). `settings`: the sections it reads
    (actors/config.py); `weights` is the learner's weight publisher."""

    def __init__(
        self,
        name: str,
        settings: GeneratorSettings,
        model_path: str,
        buffer_address: str | None,
        weights=None,
    ):
        """`buffer_address` None: no buffer client (evaluation only: `sample_eval`, no `run`)."""
        from transformers import AutoTokenizer

        from microcoder.actors.engine import build_engine
        from microcoder.actors.logs import redirect_to_run_dir
        from microcoder.buffer.client import BufferClient
        from microcoder.data.prompts import PromptRenderer
        from microcoder.device import resolve_device

        self.name, self.settings, self.weights = name, settings, weights
        redirect_to_run_dir(name)
        self.device = resolve_device(settings.device)
        self.llm = build_engine(
            model_path,
            settings.generator,
            self.device,
            seed=settings.seed,
            worker_extension_cls="microcoder.actors.worker_ext.WeightLoaderExtension",
        )
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.renderer = PromptRenderer(
            self.tokenizer, settings.prompt, settings.chat_template_kwargs
        )
        self.client = (
            BufferClient.from_config(settings.buffer, buffer_address, owner=name)
            if buffer_address
            else None
        )
        self.version = 0
        self.temperature = settings.algorithm.temperature.initial
        self.timer = PoolTimer()
        self.tokens = 0
        self.groups = 0
        self.syncs: list[dict[str, float]] = []
        self.failed_prompts = 0
        """Prompts reported failed because the engine raised on them (see generate_wave)."""
        self.errors: list[tuple[float, str]] = []
        """The newest wave errors: (unix time, message), at most 20."""
        self._stop = threading.Event()
        self._engine = threading.Lock()  # vLLM's LLM is not thread-safe: one user at a time
        self._prompt_cache: dict[str, list[int]] = {}
        self._channel: dict[str, Any] = {}

    # ------------------------------------------------------------ control (other threads)

    def ready(self) -> dict[str, Any]:
        return {"name": self.name, "device": self.device, "version": self.version}

    def stop(self) -> None:
        self._stop.set()

    def set_temperature(self, temperature: float) -> None:
        self.temperature = float(temperature)

    def stats(self) -> dict[str, Any]:
        import ray

        busy = self.timer.busy_s
        return {
            "name": self.name,
            "pid": os.getpid(),
            "node_ip": ray.util.get_node_ip_address(),  # the node hosting it, as Ray reports it
            "version": self.version,
            "temperature": self.temperature,
            "groups": self.groups,
            "tokens": self.tokens,
            "tokens_per_s": self.tokens / busy if busy else 0.0,
            **self.timer.summary(),
            "last_sync": self.syncs[-1] if self.syncs else {},
            "failed_prompts": self.failed_prompts,
            "errors": [list(e) for e in self.errors],
        }

    # ------------------------------------------------------------ the loop

    def run(self, max_waves: int | None = None) -> dict[str, Any]:
        """Generate until stopped, the prompt source is exhausted, or `max_waves` waves."""
        try:
            return self._run(max_waves)
        except BaseException:
            traceback.print_exc()  # the cause, in this actor's log (the launcher names it too)
            sys.stderr.flush()
            raise

    def _run(self, max_waves: int | None) -> dict[str, Any]:
        generation_loop(
            self.client,
            self.settings.generator.max_inflight_prompts,
            self.maybe_sync_weights,
            self._engine_wave,
            self.timer,
            self._stop,
            max_waves,
        )
        return self.stats()

    def _engine_wave(self, assignments) -> list:
        with self._engine:
            return self.generate_wave(assignments)

    def generate_wave(self, assignments) -> list:
        """Sample a wave. If the engine raises, each prompt is retried alone: the ones that fail
        again are reported to the buffer as failed (counted; twice = quarantined) with the
        error, and the wave goes on without them. A dead engine still kills the actor (Ray
        restarts it); a bad prompt never does."""
        try:
            return self.generate(assignments)
        except Exception as err:
            if _engine_dead(err):
                raise
            self._wave_error(err, f"a wave of {len(assignments)} prompts failed; retrying each")
        groups = []
        for a in assignments:
            try:
                groups += self.generate([a])
            except Exception as err:
                if _engine_dead(err):
                    raise
                reason = f"generation failed: {type(err).__name__}: {str(err)[:300]}"
                self._wave_error(err, f"prompt of problem {a.problem_id!r} failed")
                self.failed_prompts += 1
                try:
                    self.client.fail_group(a.group_id, reason)
                except Exception as lost:  # e.g. the lease expired meanwhile: say so, go on
                    print(
                        f"{self.name}: could not report group {a.group_id}: {lost}", file=sys.stderr
                    )
        return groups

    def _wave_error(self, err: BaseException, what: str) -> None:
        msg = f"{self.name}: {what}: {type(err).__name__}: {str(err).strip()[:500]}"
        print(msg, file=sys.stderr)
        traceback.print_exception(err)
        sys.stderr.flush()
        self.errors.append((time.time(), msg))
        del self.errors[:-20]

    def generate(self, assignments) -> list:
        groups = self._sample(assignments, self.temperature)
        self.tokens += count_tokens(groups)
        self.groups += len(groups)
        return groups

    def _sample(self, assignments, temperature: float) -> list:
        ids = [self._prompt_ids(a.prompt) for a in assignments]
        return sample_groups(
            self.llm,
            assignments,
            ids,
            group_size=self.settings.algorithm.group_size,
            temperature=temperature,
            max_tokens=self.settings.generator.max_response_tokens,
            policy_version=self.version,
            owner=self.name,
            ignore_eos=self.settings.generator.ignore_eos,
        )

    def _prompt_ids(self, prompt: str) -> list[int]:
        """Token ids of a prompt text rendered by the prompt layer (data/prompts.py)."""
        ids = self._prompt_cache.get(prompt)
        if ids is None:
            ids = self.renderer.encode_text(prompt)
            if len(self._prompt_cache) < 100_000:
                self._prompt_cache[prompt] = ids
        return ids

    # ------------------------------------------------------------ weights

    def maybe_sync_weights(self) -> bool:
        """Pull the learner's newest weights if they are newer than ours."""
        if self.weights is None:
            return False
        from microcoder.actors.weight_sync import pull_weights

        with self.timer.sync(), self._engine:
            result = pull_weights(
                self.llm,
                self.weights,
                self.version,
                self.name,
                self.settings.learner,
                self._channel,
            )
        if result is None:
            return False
        self.version = result["version"]
        self.syncs.append(result)
        return True

    # ------------------------------------------------------------ probes

    def probe_diversity(self, prompts: list[str], temperature: float) -> float:
        """Diversity of G samples per probe prompt at `temperature` (temperature calibration)."""
        from microcoder.buffer.messages import PromptAssignment
        from microcoder.learner.diversity import batch_diversity

        assignments = [
            PromptAssignment(group_id=-1 - i, problem_id="probe", prompt=p)
            for i, p in enumerate(prompts)
        ]
        with self._engine:
            groups = self._sample(assignments, temperature)
        return batch_diversity([[r.response_ids.tolist() for r in g.responses] for g in groups])

    def greedy(self, prompts: list[str], max_tokens: int) -> list[list[int]]:
        """Greedy token ids for rendered `prompts` (used by tests to check weight sync)."""
        from vllm import SamplingParams

        params = SamplingParams(temperature=0, max_tokens=max_tokens)
        with self._engine:
            outs = self.llm.generate(
                [{"prompt_token_ids": self._prompt_ids(p)} for p in prompts], params, use_tqdm=False
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
        with self._engine:
            samples = sample_eval(
                self.llm, self.tokenizer, prompt_texts, n, temperature, top_p, budgets
            )
        return {"version": self.version, "samples": samples}

    def shutdown(self) -> None:
        """Stop the loop, return held leases, and shut the engine down (frees /dev/shm)."""
        self.stop()
        if self.client is not None:
            try:
                self.client.release()
            except Exception:
                pass
            self.client.close()
        try:
            self.llm.llm_engine.engine_core.shutdown()
        except Exception:
            pass


def generation_loop(
    client,
    wave: int,
    sync: Callable[[], object],
    generate: Callable[[list], list],
    timer: PoolTimer,
    stop: threading.Event,
    max_waves: int | None = None,
) -> int:
    """The generator's loop; returns the number of waves. Per wave: lease up to `wave` prompts
    from `client` (a BufferClient) -> `sync()` (pull newer weights) -> `generate(assignments)`
    (the groups) -> hand them in. Ends when `stop` is set, the buffer says the run is over, or
    after `max_waves` waves. `Generator.run` runs it with the vLLM engine; `microcoder bench
    pipeline` (bench/pipeline/actors.py) runs it with a sleep as `generate`, so the bench
    measures this very loop."""
    waves = 0
    while not stop.is_set() and (max_waves is None or waves < max_waves):
        with timer.idle():
            reply = client.get_prompts(wave, wait_s=0.5)
        if reply.done:
            break
        if not reply.assignments:
            continue
        # Sync after the lease, not before: a lease may wait in the buffer while the learner
        # steps, and the groups must carry the newest version (else they are needlessly stale).
        sync()
        with timer.busy():
            groups = generate(reply.assignments)
        with timer.io():
            if groups:
                client.put_unscored(groups)
        waves += 1
    return waves


def _engine_dead(err: BaseException) -> bool:
    """vLLM's engine process is gone: nothing but a restart helps."""
    return type(err).__name__ == "EngineDeadError"
