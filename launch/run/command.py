"""The body of `microcoder launch`: one run from its directory to its exit status.

It makes (or, with --resume, reopens) the run directory, checks the placement plan and the
exporters, brings the cluster up (launch/run/cluster.py), starts monitoring (launch/monitor/session.py),
hands over to the training loop (launch/run/training_loop.py), and at the end prints the summary
table and turns an interrupt or a failure into a checkpoint, a resume hint and an exit status.
launch/cli/cmd_launch.py only parses the command line and calls `launch` here.

Ctrl-C (SIGINT) or SIGTERM: the current step finishes, a checkpoint is written, everything is
shut down; `microcoder launch --resume RUN_DIR` continues from it.
"""

from __future__ import annotations

import shutil
import signal
import tempfile
import time
from pathlib import Path

from microcoder.actors.environments.base import EnvironmentSetupError, environment_class
from microcoder.data.problem import ProblemFormatError
from microcoder.data.sources import is_synthetic
from microcoder.device import resolve_device
from microcoder.launch.config import Config
from microcoder.launch.monitor.session import check_exports, start_monitoring
from microcoder.launch.monitor.summary import TrainSummary, summary_table
from microcoder.launch.run.cluster import Run
from microcoder.launch.run.memory_check import launch_memory_errors
from microcoder.launch.run.model_dir import ensure_model
from microcoder.launch.run.placement import make_plan
from microcoder.launch.run.shared_paths import shared_path_errors
from microcoder.launch.run.training_loop import train
from microcoder.launch.run_dirs import latest_checkpoint
from microcoder.learner.models.families import model_dir_errors, read_config


def run_dir_path(cfg: Config, args) -> Path:
    """The run directory this launch uses (not created here): --resume's, --run-dir, `run_dir`,
    or runs/<timestamp>."""
    if args.resume:
        return Path(args.resume)
    return Path(args.run_dir or cfg.run_dir or f"runs/{time.strftime('%Y%m%d-%H%M%S')}")


def preflight_errors(
    cfg: Config, run_dir: Path, model_path: str, keep_store: bool = False
) -> list[str]:
    """Why this launch would stop before it starts anything ([] when nothing does), each error
    naming what to set: the problem files (read once: the pass that builds the run's problem
    store, `check_problem_source`; `keep_store`: into `run_dir`, where the bring-up reuses it,
    else into a temporary folder that is removed, as `launch --dry-run` does), the
    shared-path rule of a joined cluster (launch/run/shared_paths.py), the metric exporters and the
    model's family and shape (learner/models/families.py), and the class `environment.kind` names.
    `launch` and `launch --dry-run` both run exactly this, so a recipe whose dry-run passes
    does not stop here; the placement plan is the other check both make (`make_plan`)."""

    problem = check_problem_source(cfg, run_dir if keep_store else None)
    errors = [problem] if problem else []
    errors += shared_path_errors(cfg, run_dir, model_path)
    try:
        check_exports(cfg)
    except RuntimeError as err:
        errors.append(str(err))
    errors += model_family_errors(cfg, model_path)
    errors += sequence_parallel_errors(cfg, model_path)
    errors += environment_errors(cfg)
    return errors


def environment_errors(cfg: Config) -> list[str]:
    """`environment.kind` names a class this launcher can import (a built-in, or a user's
    `module:Class` on PYTHONPATH): otherwise every generator would refuse it at its start."""
    try:
        environment_class(cfg.environment.kind)
    except EnvironmentSetupError as err:
        return [str(err)]
    return []


def sequence_parallel_errors(cfg: Config, model_path: str) -> list[str]:
    """learner.sequence_parallel against the model's attention heads (once the folder has a
    config.json), learner.packing, algorithm.off_policy and algorithm.policy_loss (learner/sequence_parallel.py:
    model_errors), so a split the learner ranks would refuse at start stops the launch here."""
    size = cfg.learner.sequence_parallel
    if size == 1:
        return []  # no torch import on the common path
    from microcoder.learner.sequence_parallel import model_errors

    has_config = (Path(model_path) / "config.json").is_file()
    config = read_config(model_path) if has_config else None
    algo = cfg.algorithm
    return model_errors(config, size, cfg.learner.packing, algo.off_policy, algo.policy_loss)


def model_family_errors(cfg: Config, model_path: str) -> list[str]:
    """The model folder's family and shape against learner/models/families.py (supported families; a
    head_dim vLLM's CPU attention cannot run when the generators run on CPU; learner.lora's family
    and targets vLLM cannot serve as an adapter); [] while the folder has no config.json yet (the
    tiny model is built at launch)."""

    device = cfg.cluster.device
    if device == "auto":  # a joined cluster's devices are its own: only a local one is known
        device = resolve_device("auto") if cfg.cluster.address == "local" else None
    lora = cfg.learner.lora
    return model_dir_errors(model_path, device, None if lora is None else lora.targets)


def progress_line(rec: dict, max_steps: int) -> str:
    """The step line; `mismatch k3`: the learner's KL estimate between the generators' and its own
    log-probs at the sampled tokens (learner/algorithm/mismatch.py)."""
    return (
        f"step {rec['step']:>4}/{max_steps} | reward {rec.get('reward_mean', 0):.3f} "
        f"| loss {rec.get('loss', 0):+.4f} | gen {rec.get('gen_tokens_per_s', 0):7.0f} tok/s "
        f"| train {rec.get('tokens_per_s', 0):7.0f} tok/s | judge {rec.get('tests_per_s', 0):6.0f} tests/s "
        f"| stale {rec.get('staleness_mean', 0):.2f} | mismatch k3 {rec.get('mismatch_kl', 0):.1e} "
        f"| T {rec.get('temperature', 0):.2f} "
        f"| {rec.get('step_s', 0):.1f} s"
    )


def launch(cfg: Config, args) -> int:
    joined = cfg.cluster.address != "local"
    run_dir = run_dir_path(cfg, args)
    if joined:  # actors on other nodes get every path absolute (their working directory differs)
        run_dir = run_dir.resolve()
    resume_from = None
    if args.resume:
        resume_from = latest_checkpoint(run_dir)
        if resume_from is None:
            print(f"launch: {run_dir} has no complete checkpoint to resume from")
            return 2
    # before any run directory, model or Ray: a bad file or a missing shared_dir costs a second
    errors = preflight_errors(cfg, run_dir, str(resume_from or cfg.model.path), keep_store=True)
    if errors:
        print("launch: " + "\nlaunch: ".join(errors))
        return 2
    plan = None
    if not joined:  # a joined run's plan and `device = "auto"` come from the cluster
        plan = local_plan(cfg)
        if plan is None:
            return 2
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.toml").write_text(cfg.to_toml())
    run = Run(cfg, run_dir, cfg.cluster.address, resume_from)
    run.log(f"run directory: {run_dir.resolve()} (config.toml, metrics.jsonl, logs/, checkpoints/)")
    for note in cfg.notes():
        run.log(f"config note: {note}")
    if plan is not None:
        print(plan.format(), flush=True)
    stopping = {"signal": None}

    def on_signal(signum, _frame):
        if stopping["signal"] is not None:
            raise KeyboardInterrupt
        stopping["signal"] = signum
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, on_signal)
    monitor = None
    try:
        monitor = start_monitoring(run)  # dashboard URL printed now; pools appear as they start
        model_path = str(resume_from) if resume_from else str(ensure_model(cfg.model, cfg))
        if joined:
            model_path = str(Path(model_path).resolve())
        run.start_ray(plan.cpus if plan is not None else 0.0)
        signal.signal(signal.SIGTERM, on_signal)  # ray.init replaced it with a bare sys.exit
        run.bring_up(model_path)
        monitor.set_state("running")
        summary = train(
            run, progress=lambda rec: print(progress_line(rec, cfg.max_steps), flush=True)
        )
        return finish(run, summary)
    except KeyboardInterrupt:
        run.log("interrupted: checkpointing, then shutting down (Ctrl-C again to abort)")
        if run.learners is not None:
            try:
                run.checkpoint_now()
            except Exception as err:
                run.log(f"checkpoint on interrupt failed: {err}")
        return 130
    except Exception as err:  # e.g. a learner rank or the buffer died: the run cannot go on
        say_failed(run, run_dir, err)
        raise
    finally:
        signal.signal(signal.SIGTERM, old)
        if monitor is not None:
            monitor.stop()
        run.shutdown()


def finish(run, summary: TrainSummary) -> int:
    """After the training loop: a checkpoint of the last step (unless the loop wrote it), the
    summary, and the exit code (3 when the run stopped before max_steps)."""
    run.checkpoint_now()  # the last step's, or the one the loop started still being written
    print_summary(run, summary)
    if summary.stopped:
        say_stopped(run, summary.stopped, early=True)
        return 3
    return 0


def local_plan(cfg: Config):
    """The placement plan of a run on this machine (`cluster.device` resolved in `cfg`), or None
    once its errors, or a memory plan that does not fit this GPU, are printed."""

    device = resolve_device(cfg.cluster.device)
    cfg.cluster.device = device
    plan = make_plan(cfg, device, float(cfg.cluster.local_cpus()), _gpus(device))
    if plan.errors:
        print(plan.format())
        return None
    if memory := launch_memory_errors(cfg, device):  # the dry-run's memory plan, this GPU
        print("launch: " + "\nlaunch: ".join(memory))
        return None
    return plan


def say_failed(run, run_dir: Path, err: Exception) -> None:
    """A run that cannot go on (e.g. a learner rank or the buffer died): why (the buffer's death
    when an error elsewhere was its symptom), a last checkpoint when possible, and what to do."""

    why = f"{type(err).__name__}: {str(err).splitlines()[0][:300]}"
    replica = type(err).__name__ == "ReplicaFailed"  # its message was logged in full
    if not replica and run.buffer_gone() and run.fatal not in why:  # a symptom seen first
        why = f"BufferDied: {run.fatal} (seen as {why})"
    say_stopped(run, why)
    try:
        run.checkpoint_now()  # possible when neither the learner nor the buffer died
    except Exception:
        pass
    newest = latest_checkpoint(run_dir)
    if run.learners is None and newest is None:  # it stopped during bring-up
        run.log("nothing was trained yet: fix what the line above names and launch again")
    elif newest is not None:
        run.log(f"resume with: microcoder launch --resume {run_dir}   (from {newest.name})")
    else:
        run.log(
            "no checkpoint was written yet: set learner.checkpoint_every to keep resumable state"
        )
    run.log(f"details: {run_dir / 'logs'} (one log per actor) and the traceback below")


def say_stopped(run, why: str, early: bool = False) -> None:
    """Why the run stopped before max_steps: in the launch log and as an "event" record
    (event="stopped"), which `microcoder compare` reports beside the exit status."""
    run.log(f"the run stopped{' early' if early else ''}: {why}")
    try:
        run.metrics.log("event", event="stopped", message=why)
    except (OSError, ValueError):  # a closed or unwritable metrics file: the log line stands
        pass


def check_problem_source(cfg: Config, run_dir: Path | None = None) -> str:
    """Why the run's problem files cannot be loaded ("" when they can, or every source is a
    bundled synthetic family): checked on the driver before anything starts, so a missing file
    or a bad row stops the launch at once with its file, line and field, not after the model and
    Ray. The check is the problem store's build (data/store.py, one streaming pass per file),
    into `run_dir`/problems.sqlite, where the bring-up finds and reuses it (None: a temporary
    folder, removed after), so the file is parsed once per launch."""

    if all(is_synthetic(s.path) for s in cfg.data.source_list()):
        return ""
    from microcoder.data.store import STORE_NAME
    from microcoder.launch.run.problems import build_run_store

    def log(
        msg: str,
    ) -> None:  # progress, timestamped as the bring-up's lines ("launch: " = errors)
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)

    made = run_dir is not None and not run_dir.exists()  # a refused launch leaves no run dir
    with tempfile.TemporaryDirectory(prefix="microcoder-check-") as tmp:
        folder = run_dir if run_dir is not None else Path(tmp)
        try:
            build_run_store(cfg, folder / STORE_NAME, log)
        except (ProblemFormatError, ValueError, FileNotFoundError) as err:
            if made:
                shutil.rmtree(folder, ignore_errors=True)
            if isinstance(err, FileNotFoundError):
                where = "data.sources' paths" if cfg.data.sources else "data.source"
                return f"{err} (set {where} to a problem file, or to synthetic)"
            return f"problem file: {err}"
    return ""


def _gpus(device: str) -> float:
    if device != "cuda":
        return 0.0
    import torch

    return float(torch.cuda.device_count())


def print_summary(run, summary: TrainSummary) -> None:
    """The end-of-run table: held-out pass rates at start and end, the reward curve, where the
    wall time went."""

    pools = {"generators": run.generators.stats(), "executors": run.executors.stats()}
    text = summary_table(run.metrics.history, summary, pools)
    print(text, flush=True)
    (run.run_dir / "summary.txt").write_text(text + "\n")
