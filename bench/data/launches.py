"""One real launch of the tiny config to step 1, timed and sampled, and an executor's start.

`launch_once` runs `microcoder launch CONFIG --run-dir DIR --set data.source=... --set
max_steps=1 --set eval.every=0 --set algorithm.dynamic_filtering=false` (`settings`) in its own process group
and, while it runs, samples the peak RSS of the launcher, the buffer actor and the executor
(rss.py). Afterwards it reads, from the run directory:
- `first_prompt_s`: the buffer's one line "first prompts handed out ... (unix time T)"
  (buffer/server.py) minus the launch's start;
- `step1_s`: the first `step` record of metrics.jsonl (its `time`) minus the launch's start;
- `phases`: seconds from the start to each phase line of launcher.log (1 s resolution).

`executor_start` times one executor's construction and `ready()` in a fresh process: the one
place that knows the executor's constructor arguments.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from microcoder.bench.data.rss import PeakSampler, actor_role, pid_role

ROLES = {"buffer": "BufferHost", "executor": "Executor"}
"""Sampled roles beside the launcher ("driver"): role -> Ray actor class."""
PHASES = {
    "run_dir_made": r"^run directory: ",  # after the preflight (a problem file parsed once)
    "loading_problems": r"^loading the problems",
    "problems_loaded": r"training prompts \(",
    "buffer_started": r"^buffer at ",
    "executors_starting": r"^starting \d+ executor",
    "generators_starting": r"^starting \d+ generator",
    "pools_running": r"^all pools running",
}
"""launcher.log lines whose time the bench reports (seconds since the launch's start)."""
FIRST_PROMPT = re.compile(r"first prompts handed out: .*\(unix time ([0-9.]+)\)")


def settings(source: str, extra: list[str]) -> list[str]:
    """The `--set` values of a bench launch on `source` (a file or a synthetic family name)."""
    src = source if source.startswith("synthetic") else str(Path(source).resolve())
    base = [
        f'data.source="{src}"',
        "max_steps=1",
        "eval.every=0",  # a generated file has no held-out set; the same for the baseline
        "monitor.dashboard_port=0",
        # the tiny model fails every generated problem: with dynamic filtering a file launch
        # would skip steps on all-equal groups; off, step 1 is one batch on either source
        "algorithm.dynamic_filtering=false",
    ]
    return base + list(extra)


def phase_seconds(launcher_log: Path, t0: float) -> dict[str, float]:
    """Seconds from `t0` (unix time) to each PHASES line of launcher.log ("[HH:MM:SS] ...", the
    launcher's local time; whole seconds)."""
    out: dict[str, float] = {}
    if not launcher_log.is_file():
        return out
    start = time.localtime(t0)
    t0_of_day = start.tm_hour * 3600 + start.tm_min * 60 + start.tm_sec + (t0 % 1)
    for line in launcher_log.read_text(errors="replace").splitlines():
        m = re.match(r"\[(\d\d):(\d\d):(\d\d)\] (.*)", line)
        if not m:
            continue
        h = int(m[1])
        mi = int(m[2])
        s = int(m[3])
        text = m[4]
        for name, pattern in PHASES.items():
            if name not in out and re.search(pattern, text):
                out[name] = round((h * 3600 + mi * 60 + s - t0_of_day) % 86400, 1)
    return out


def run_figures(run_dir: Path, t0: float) -> dict[str, Any]:
    """first_prompt_s, step1_s and phases of a finished launch in `run_dir` started at `t0`."""
    out: dict[str, Any] = {"first_prompt_s": None, "step1_s": None}
    buffer_log = run_dir / "logs" / "buffer.log"
    if buffer_log.is_file():
        m = FIRST_PROMPT.search(buffer_log.read_text(errors="replace"))
        if m:
            out["first_prompt_s"] = round(float(m[1]) - t0, 1)
    metrics = run_dir / "metrics.jsonl"
    if metrics.is_file():
        for line in metrics.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("kind") == "step":
                out["step1_s"] = round(rec["time"] - t0, 1)
                break
    out["phases"] = phase_seconds(run_dir / "launcher.log", t0)
    return out


def launch_once(
    config: str, source: str, run_dir: Path, extra: list[str], timeout_s: float
) -> dict[str, Any]:
    """Launch `config` on `source` to step 1 in `run_dir` (replaced); its figures (module doc),
    `returncode` and `wall_s`. The launch's output goes to `run_dir`.log."""
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    args = [a for s in settings(source, extra) for a in ("--set", s)]
    cmd = [sys.executable, "-m", "microcoder", "launch", config, "--run-dir", str(run_dir), *args]
    log_path = run_dir.with_name(run_dir.name + ".log")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with log_path.open("w") as log:
        t0 = time.time()
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env
        )
        roles = {"driver": pid_role(proc.pid)}
        roles.update({role: actor_role(cls) for role, cls in ROLES.items()})
        try:
            with PeakSampler(roles) as sampler:
                try:
                    proc.wait(timeout=timeout_s)
                except subprocess.TimeoutExpired:
                    print(f"bench data: {run_dir.name} ran past {timeout_s:.0f} s", file=sys.stderr)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        wall = time.time() - t0
    out = run_figures(run_dir, t0)
    out.update(
        returncode=proc.returncode,
        wall_s=round(wall, 1),
        peak_mb={role: round(mb) for role, mb in sampler.peaks_mb.items()},
        rss_samples=sampler.samples,
        log=str(log_path),
    )
    return out


STORE_SCRIPT = r"""
import json, sys, time
from pathlib import Path
from microcoder.launch.config import load_config
from microcoder.launch.run.problems import build_run_store
cfg = load_config(sys.argv[2], sys.argv[3:])
t0 = time.perf_counter()
path, built = build_run_store(cfg, Path(sys.argv[1]), log=lambda m: print(m, file=sys.stderr))
print(json.dumps({"seconds": round(time.perf_counter() - t0, 1), "built": built}))
"""

EXECUTOR_SCRIPT = r"""
import json, sys, time, psutil
from microcoder.launch.config import load_config
from microcoder.actors.executor import Executor
import microcoder.data.store, microcoder.sandbox.backends, microcoder.buffer.client
cfg = load_config(sys.argv[2], sys.argv[3:])
t0 = time.perf_counter()
ex = Executor("executor-bench", cfg.executor, None, None, sys.argv[1])
ready = ex.ready()
seconds = time.perf_counter() - t0
rss = psutil.Process().memory_info().rss / 2**20
ex.shutdown()
print(json.dumps({"seconds": round(seconds, 2), "rss_mb": round(rss), "problems": ready["problems"]}))
"""


def executor_start(config: str, source: str, extra: list[str], store: Path) -> dict[str, Any]:
    """Seconds from constructing an executor with the run's arguments to its `ready()`, and its
    RSS then, in a fresh process (imports done before the clock starts). The executor opens the
    run's problem store by path (actors/executor.py; launch/run/cluster.py `start_pools` passes
    RUN_DIR/problems.sqlite): `store` is built first, in its own process, if it is not there
    (launch/run/problems.py `build_run_store`, reused when its key matches: a launch's store or
    an earlier bench's); its build seconds are `store_s` (None when a launch built it). The
    executor's constructor arguments live here only: change them here when they change."""
    out: dict[str, Any] = {"store_s": None}
    # reused when its key matches (a synthetic store's key reads no file)
    store.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-c", STORE_SCRIPT, str(store), config, *settings(source, extra)]
    res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=sys.stderr, text=True, timeout=3600)
    if res.returncode != 0:
        return {**out, "seconds": None, "rss_mb": None, "error": "store build failed"}
    built = json.loads(res.stdout.strip().splitlines()[-1])
    out["store_s"] = built["seconds"] if built["built"] else None
    cmd = [sys.executable, "-c", EXECUTOR_SCRIPT, str(store), config, *settings(source, extra)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if res.returncode != 0:
        return {**out, "seconds": None, "rss_mb": None, "error": res.stderr.strip()[-500:]}
    return {**out, **json.loads(res.stdout.strip().splitlines()[-1])}


def prepare_model(config: str, extra: list[str]) -> None:
    """Build (or find cached) the config's model folder before any timed launch, so no launch's
    time or driver peak holds a warm start (launch/run/model_dir.py `ensure_model`)."""
    script = (
        "import sys\n"
        "from microcoder.launch.config import load_config\n"
        "from microcoder.launch.run.model_dir import ensure_model\n"
        "cfg = load_config(sys.argv[1], sys.argv[2:])\n"
        "ensure_model(cfg.model, cfg)\n"
    )
    cmd = [sys.executable, "-c", script, config, *extra]
    subprocess.run(cmd, check=True, stdout=sys.stderr)  # stdout is for the figures (--json)
