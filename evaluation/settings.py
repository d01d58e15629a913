"""What one evaluation does (EvalSettings) and how it fails (EvalError)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


class EvalError(RuntimeError):
    """An evaluation could not finish; the message names the actor (if any) and the remedy."""


@dataclass
class EvalSettings:
    """Sampling, pass@k and pipelining of one evaluation (the CLI and a run's periodic eval
    fill it; defaults are LiveCodeBench's pass@1 settings: n = 10 at T = 0.2, top_p = 0.95)."""

    samples: int = 10
    """Samples per problem (n of pass@k). Ignored with precomputed generations."""
    ks: list[int] = field(default_factory=lambda: [1])
    """k values of pass@k; those above `samples` are dropped by the caller (with a warning)."""
    budgets: list[int] = field(default_factory=lambda: [4096])
    """Test budgets (max new tokens), ascending; generation runs once at the largest."""
    temperature: float = 0.2
    """Sampling temperature; 0 = greedy."""
    top_p: float = 0.95
    """Nucleus sampling mass (1.0 = off)."""
    sequences_per_call: int = 128
    """Target sequences (prompts x samples) per generator call; the last calls are smaller so
    the judging tail is short. Larger = better engine batching, later first results."""
    calls_in_flight: int = 2
    """Generator calls queued per generator (one runs, the next waits: the engine never idles)."""
    judge_batch: int = 0
    """Programs per executor call; 0 = twice the executor's sandbox workers (at least 8)."""
    judge_calls_in_flight: int = 2
    """Executor calls queued per executor. An executor actor runs up to 4 calls at once and,
    in a training run, its loop holds one of them: 2 leaves room for stats calls."""
    call_timeout_s: float = 3600.0
    """A generator or executor call not answered within this many seconds stops the
    evaluation (the actor is hung or the machine far too slow); samples so far are kept."""
    progress_every_s: float = 2.0
    """Seconds between progress reports."""
    resume: bool = False
    """Continue from out_dir/samples.jsonl: keys already judged are neither generated nor
    judged again."""
    label: str = ""
    """Prefix of the progress line (e.g. "eval step 40 T=0")."""
    reuse_verdicts: bool = True
    """Judge each distinct (problem, program) once: identical programs (common at low T, and a
    sample not cut at a smaller budget) reuse the verdict."""
    max_turns: int = 1
    """Turns per sample (`microcoder eval --max-turns N`): with more than 1 each sample is a
    trajectory of the run's multi-turn environment (`environment.kind`; `repair` when the config
    says `single`) sampled by the training generators' runner (actors/trajectory.py), every
    turn capped at the one budget; the program of each turn (the last turn's once the
    trajectory ended) is judged on all tests, and the report has pass@k after each turn
    (`by_turn`, turn 1 the single-turn figure)."""
    reasoning: str = "auto"
    """Where a reply's final answer starts: the resolved `prompt.reasoning` (none, think,
    marker:END; sandbox/extract.py). The run and `microcoder eval --model` resolve `auto` from
    the model's chat template; left `auto` (a generations file without a model) it is decided
    per reply (`think` when the reply holds <think> or </think>)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
