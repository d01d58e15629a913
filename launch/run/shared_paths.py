"""The shared-path rule of a joined cluster (`--address` other than local): what every node must
see, and the check a launch makes before it starts anything.

Actors open files by path on their own node: generators and learner ranks load the model folder,
learner ranks write checkpoints under the run directory, every actor's log goes to RUN_DIR/logs,
the buffer writes its snapshots under the run directory, every buffer client reads the CurveZMQ
keys folder (RUN_DIR/keys or `buffer.keys_dir`), and executors read a data file
(`data.source`). The problems themselves travel through Ray (the driver sends the prompts to the
buffer; held-out problems reach executors as calls), so only those paths matter.

The rule: a joined run declares `cluster.shared_dir`, a folder every node mounts at the same
path, and the run directory, the model folder, a data file and `buffer.keys_dir` lie under it.
A launch whose paths break it stops before Ray, naming the path and what to set. A local run is
one machine: every path is shared and nothing is checked. The software (Python environment,
`executor.python`, `executor.extra_ro_paths`) is the nodes' install, as Ray itself requires.
"""

from __future__ import annotations

from pathlib import Path

from microcoder.data.sources import is_synthetic
from microcoder.launch.config import Config


def shared_paths(cfg: Config, run_dir: Path, model_path: str) -> dict[str, Path]:
    """What every node opens by path in this run, by the config key that names it (resolved
    against the driver's working directory, as the launcher hands them to the actors)."""
    paths = {"run directory (--run-dir / run_dir)": run_dir, "model.path": Path(model_path)}
    if cfg.buffer.curve and cfg.buffer.keys_dir:
        paths["buffer.keys_dir"] = Path(cfg.buffer.keys_dir)
    if not is_synthetic(cfg.data.source):
        paths["data.source"] = Path(cfg.data.source)
    return {key: Path(path).expanduser().resolve() for key, path in paths.items()}


def shared_path_errors(cfg: Config, run_dir: Path, model_path: str) -> list[str]:
    """Why this joined run's paths break the shared-path rule ([] when they keep it, and always
    on a local run). Each error names the path and what to set."""
    if cfg.cluster.address == "local":
        return []
    if not cfg.cluster.shared_dir:
        return [
            f"a run on the cluster at {cfg.cluster.address} needs cluster.shared_dir: a folder "
            "every node mounts at the same path (the model folder, the run directory with its "
            "checkpoints, logs and buffer keys, and a data file must lie under it, since actors "
            'on other nodes open them by path); set cluster.shared_dir = "/path/to/shared" '
            '(on one machine "/" declares every path shared)'
        ]
    shared = Path(cfg.cluster.shared_dir).expanduser().resolve()
    if not shared.is_dir():
        return [f"cluster.shared_dir = {cfg.cluster.shared_dir!r} is not a folder here ({shared})"]
    return [
        f"{key} = {path} is not under cluster.shared_dir = {shared}: actors on other nodes "
        f"could not open it; move it under {shared} (or set cluster.shared_dir to a shared "
        "folder that holds it)"
        for key, path in shared_paths(cfg, run_dir, model_path).items()
        if not path.is_relative_to(shared)
    ]
