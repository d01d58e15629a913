"""`microcoder bench checkpoint-overlap`: the time of a learner step that overlaps an
asynchronous checkpoint's background write against a step that does not, in the same process
(issue 49; goal ratio ≤ 1.1).

One Learner on the tiny model (runs/tiny-model-warm, the tiny run's model) trains rounds of
steps on the same kind of synthetic batches: a plain step, and per arm `start_save` (the
snapshot to host memory, which the training loop does pay) then a step while the writer writes
the DCP shards and the HF folder. Within a round the order of the steps rotates, so machine
noise hits every arm alike; each overlapping step is divided by its own round's plain step
(paired), and the median and spread of those ratios are reported with the load average. Arms
(`--arms`): "thread" (the learner's writer as it is), "nice" (the writer's threads at nice 19),
"switch" (the GIL switch interval lowered while a write runs). Also reported: the snapshot's
seconds (the loop's cost of an async save), the write's seconds, and a synchronous save's
seconds (what the loop paid before).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from microcoder.bench.model_folder import add_model_argument, model_folder

DESCRIPTION = (
    "learner step time overlapping an async checkpoint write vs not, same run (goal ≤ 1.1×)"
)
USUAL = ("runs/tiny-model-warm",)
ARMS = ("thread", "nice", "switch")
SWITCH_INTERVAL_S = 0.0005
"""The "switch" arm's GIL switch interval while a write runs (Python's default: 0.005 s)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_argument(parser, USUAL)
    parser.add_argument("--rounds", type=int, default=10, help="timed rounds (default 10)")
    parser.add_argument("--groups", type=int, default=4, help="groups per batch (default 4)")
    parser.add_argument("--group-size", type=int, default=8, help="responses per group (default 8)")
    parser.add_argument(
        "--response-len", type=int, default=48, help="tokens per response (default 48)"
    )
    parser.add_argument(
        "--arms",
        default="thread",
        help=f"comma-separated writer arms, each paired with the plain step: {', '.join(ARMS)} "
        "(default thread)",
    )


def batch(args: argparse.Namespace, step: int, vocab: int) -> list:
    from microcoder.learner.sample import SampleGroup, TrainSample

    rng = random.Random(step)
    groups = []
    for g in range(args.groups):
        prompt = [rng.randrange(vocab) for _ in range(64)]
        samples = [
            TrainSample(
                prompt,
                [rng.randrange(vocab) for _ in range(args.response_len)],
                [-4.0] * args.response_len,
                1.0,
                float(i % 2),
                False,
                "CE",
                0,
            )
            for i in range(args.group_size)
        ]
        groups.append(SampleGroup(f"{step}-{g}", samples))
    return groups


def writer_threads(before: set[int]) -> list[int]:
    """Threads of this process started since `before` (the writer and DCP's executor)."""
    return [int(t) for t in os.listdir("/proc/self/task") if int(t) not in before]


def own_threads() -> set[int]:
    return {int(t) for t in os.listdir("/proc/self/task")}


class Arm:
    """How an overlapping step's background write is run: as the learner does ("thread"), its
    threads at nice 19 ("nice"), or the interpreter's GIL switch interval lowered to
    SWITCH_INTERVAL_S while it writes ("switch": the step's thread waits less for the GIL each
    time a torch op hands it back)."""

    def __init__(self, name: str):
        if name not in ARMS:
            raise ValueError(f"unknown arm {name!r}: choose from {', '.join(ARMS)}")
        self.name = name
        self.niced: list[int] = []
        self.interval = sys.getswitchinterval()

    def begin(self, before: set[int]) -> None:
        if self.name == "nice":
            self.niced = writer_threads(before)
            for tid in self.niced:
                os.setpriority(os.PRIO_PROCESS, tid, 19)
        elif self.name == "switch":
            sys.setswitchinterval(SWITCH_INTERVAL_S)

    def end(self) -> None:
        for tid in self.niced:
            try:
                os.setpriority(os.PRIO_PROCESS, tid, 0)  # a thread the executor keeps
            except (ProcessLookupError, PermissionError):
                pass
        self.niced = []
        sys.setswitchinterval(self.interval)


def loadavg() -> list[float]:
    """The 1, 5 and 15 minute load averages (/proc/loadavg)."""
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def spread(values: list[float]) -> dict[str, float]:
    """Median, quartiles, min and max of `values`."""
    q = (
        statistics.quantiles(values, n=4, method="inclusive")
        if len(values) > 1
        else [values[0]] * 3
    )
    return {
        "median": statistics.median(values),
        "q1": q[0],
        "q3": q[2],
        "min": min(values),
        "max": max(values),
    }


def run(args: argparse.Namespace) -> dict:
    from microcoder.learner.checkpoint import save_checkpoint, start_save
    from microcoder.learner.config import AlgorithmConfig, LearnerConfig
    from microcoder.learner.distributed import close_distributed
    from microcoder.learner.trainer import Learner

    arms = [Arm(a.strip()) for a in args.arms.split(",") if a.strip()]
    plain: list[float] = []
    steps: dict[str, list[float]] = {a.name: [] for a in arms}
    ratios: dict[str, list[float]] = {a.name: [] for a in arms}
    snapshot: dict[str, list[float]] = {a.name: [] for a in arms}
    outlasted = dict.fromkeys(steps, 0)
    load_start = loadavg()
    with tempfile.TemporaryDirectory() as tmp:
        model = model_folder(args.model, USUAL, tmp)
        learner = Learner(model, LearnerConfig(lr=1e-6), AlgorithmConfig(truncation_mask="none"))
        vocab = learner.model.config.vocab_size
        learner.train_step(batch(args, 0, vocab))  # warm-up
        t0 = time.perf_counter()
        save_checkpoint(learner, Path(tmp) / "sync")
        sync_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        start_save(learner, Path(tmp) / "alone").wait(600)
        write_s = time.perf_counter() - t0  # snapshot + write with nothing beside it
        order: list[Arm | None] = [None, *arms]  # None: the plain step
        n = 0
        for r in range(args.rounds):
            shift = r % len(order)  # the order rotates every round
            took: dict[str, float] = {}
            for arm in order[shift:] + order[:shift]:
                n += 1
                pending = None
                if arm is not None:
                    before = own_threads()
                    t0 = time.perf_counter()
                    pending = start_save(learner, Path(tmp) / f"ckpt{r}-{arm.name}")
                    snapshot[arm.name].append(time.perf_counter() - t0)
                    arm.begin(before)
                t0 = time.perf_counter()
                learner.train_step(batch(args, n, vocab))
                took["" if arm is None else arm.name] = time.perf_counter() - t0
                if pending is not None:
                    outlasted[arm.name] += not pending.done()  # the write ran through the step
                    pending.wait(600)
                    arm.end()
            plain.append(took[""])
            for arm in arms:
                steps[arm.name].append(took[arm.name])
                ratios[arm.name].append(took[arm.name] / took[""])
        params = sum(p.numel() for p in learner.model.parameters())
        del learner
        close_distributed()
    per_arm = {
        a: {
            "overlapped_step_s": statistics.median(steps[a]),
            "ratio_of_medians": statistics.median(steps[a]) / statistics.median(plain),
            "paired_ratio": spread(ratios[a]),
            "snapshot_s": statistics.median(snapshot[a]),
            "rounds_write_outlasted_step": outlasted[a],
        }
        for a in steps
    }
    first = per_arm[arms[0].name]
    return {
        "plain_step_s": statistics.median(plain),
        "overlapped_step_s": first["overlapped_step_s"],
        "ratio": first["overlapped_step_s"] / statistics.median(plain),
        "snapshot_s": first["snapshot_s"],
        "sync_save_s": sync_s,
        "async_save_alone_s": write_s,
        "rounds_write_outlasted_step": first["rounds_write_outlasted_step"],
        "rounds": args.rounds,
        "model_params": params,
        "arms": per_arm,
        "loadavg_start": load_start,
        "loadavg_end": loadavg(),
    }


def format_table(result: dict) -> str:
    r = result
    lines = [
        f"checkpoint overlap ({r['model_params'] / 1e6:.2f} M params, {r['rounds']} rounds; "
        f"load {'/'.join(f'{x:.1f}' for x in r['loadavg_start'])} at start, "
        f"{'/'.join(f'{x:.1f}' for x in r['loadavg_end'])} at end)",
        f"  plain step (median)                 {r['plain_step_s']:.3f} s",
        f"  synchronous save (before)           {r['sync_save_s']:.3f} s",
        f"  async save, snapshot + write alone  {r['async_save_alone_s']:.3f} s",
        "  ratio (goal <= 1.1): an overlapping step over its own round's plain step",
    ]
    for name, a in r["arms"].items():
        p = a["paired_ratio"]
        lines += [
            f"  [{name}] step overlapping a write (median) {a['overlapped_step_s']:.3f} s; "
            f"snapshot {a['snapshot_s']:.3f} s; writes that outlasted the step "
            f"{a['rounds_write_outlasted_step']}/{r['rounds']}",
            f"  [{name}] paired ratio median {p['median']:.3f}  (quartiles {p['q1']:.3f}-"
            f"{p['q3']:.3f}, min {p['min']:.3f}, max {p['max']:.3f}); ratio of medians "
            f"{a['ratio_of_medians']:.3f}",
        ]
    return "\n".join(lines)
