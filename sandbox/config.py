"""Config of the executor pool and the judge it runs (section `[executor]`). No torch import."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from microcoder.config import Section
from microcoder.resources import CustomResources
from microcoder.sandbox.rewards.plugin import DEFAULT_REWARD, resolve_reward


class ExecutorConfig(Section):
    num_executors: int = Field(1, ge=0)
    """Executor actors (each owns one judge pool). Scale a live run with `microcoder scale executors N`."""
    cpus_per_executor: float = Field(1.0, gt=0)
    """Ray CPUs reserved by each executor actor (its sandbox workers run on them)."""
    resources: CustomResources = {}
    """Ray custom resources each executor takes, {NAME = AMOUNT} (e.g. {second = 1}): its
    replicas run only on nodes that advertise them (`ray start --resources '{"second": 4}'`),
    which pins the pool to those nodes; the placement plan checks the cluster has enough.
    Empty = any node."""
    workers: int = Field(0, ge=0)
    """Sandbox worker processes per executor (programs judged at once). 0 means one per CPU
    granted: in a Ray actor, the CPUs Ray gave it (`cpus_per_executor`, rounded down, at least
    1); outside Ray (`microcoder judge`, benches), the cores this process may run on."""
    backend: Literal["local", "http"] = "local"
    """Where programs are judged (sandbox/backends.py): `local`, this host's sandbox pool
    (bubblewrap), or `http`, remote judge services at `judge_url` (`microcoder judge serve`;
    the JSON protocol is in sandbox/remote/client.py and docs/architecture.md), for clusters whose
    containers deny user namespaces or to share judge nodes between trainers. With `http`,
    `workers` is how many programs are in flight at once (0 = the answering servers' worker
    counts summed) and the sandbox settings below are the servers' own."""
    judge_url: list[str] = Field(default_factory=list)
    """The judge services of the `http` backend: one URL ("http://judge-node:8790", a list of
    one) or a list of them (["http://j1:8790", "http://j2:8790"]), each a `microcoder judge
    serve`. Programs spread across them by problem: a problem's programs go to one server (the
    least loaded when the problem is first seen, then the same one, so its tests are sent to
    it once and named by reference after); a server that fails is skipped and the program
    retried on the next; SE naming every URL when all fail. At start, the servers that do not
    answer are warned about and retried later; none answering is an error. Keep them on a
    private network (set MICROCODER_JUDGE_TOKEN on both sides for a shared token)."""
    http_timeout_s: float = Field(120.0, gt=0)
    """`http` backend: seconds one request may take (an upload of a problem's tests, or a
    program's whole judging, queueing on the server included) before that server counts as
    failed for it; the program then goes to the next server, SE when none is left."""
    judge_cache_mb: int = Field(1024, ge=1)
    """`microcoder judge serve`: MiB of problems (their tests, checker and limits, counted as
    the JSON uploaded plus 320 bytes per test, about their size in memory) the service keeps
    so that clients name them by reference instead of sending the tests with every program;
    the least recently used are dropped first (a client whose problem was dropped uploads it
    again). A problem larger than this is kept alone."""
    isolation: Literal["bwrap", "none"] = "bwrap"
    """`bwrap`: every worker runs inside bubblewrap (no network, read-only root, private /tmp).
    `none`: no isolation at all (only for trusted code; the judge warns loudly)."""
    time_limit_s: float = Field(2.0, gt=0)
    """Default wall-clock limit per test in seconds, used when a problem declares none."""
    memory_mb: int = Field(512, ge=16)
    """Default address-space limit per program in MiB, used when a problem declares none."""
    output_limit_kb: int = Field(1024, ge=1)
    """Output floor in KiB. A stdin test's cap is output_limit_kb KiB + output_limit_factor × the
    bytes of that test's expected output, for stdout, stderr and any file the program writes.
    Functional and assert programs get output_limit_kb KiB for those, and output_limit_kb KiB +
    output_limit_factor × the bytes of all expected values for the values they return. A
    program that writes more is stopped: verdict OLE."""
    output_limit_factor: float = Field(4.0, ge=1.0)
    """How many times its expected output's size a correct program may print (dimensionless);
    4 covers CRLF line ends, trailing blanks and long float formats (`repr` vs `%.6f`)."""
    early_exit: bool = True
    """Stop judging a solution at its first failing test (RL rewards need only pass/fail)."""
    partial_credit: bool = False
    """Reward = fraction of tests passed instead of 1/0 (implies running all tests)."""
    wall_factor: float = Field(3.0, ge=1.0)
    """A test is also stopped (TLE) when its wall-clock time exceeds wall_factor × its time limit
    + 0.5 s (catches sleeping programs; CPU time is the primary limit, robust on a loaded host)."""
    max_processes: int = Field(16, ge=1)
    """Processes (and threads) a program may run at once, itself included (fork bombs stop here)."""
    tmpfs_mb: int = Field(64, ge=1)
    """Size of the program's private writable /tmp in MiB (bwrap isolation only)."""
    open_files: int = Field(64, ge=8)
    """Open file descriptors a program may hold (RLIMIT_NOFILE)."""
    pin_cpus: bool = True
    """Run each worker (its fork server, its Python programs and the host thread that drives
    it) on one CPU of its own: the least claimed, over every pool on the host, of the CPUs this
    process may use (sandbox/claims.py). Judging a short program is a chain of wake-ups between
    these three; across CPUs each costs ~10x the CPU it costs on one, and pinned workers judged
    the bench's short programs 13-21 % faster. C++/Java programs use every CPU. Set false where
    other work keeps CPUs busy that the judge would be pinned to."""
    sandbox_uid_base: int = Field(61000, ge=1000)
    """Root hosts, bwrap only: each worker's programs run as a host uid of their own, the lowest
    free one in [sandbox_uid_base, sandbox_uid_base + 4096), claimed host-wide through a lock
    file (sandbox/claims.py), so no two workers of any pools on the host share one: the per-uid
    process limit holds and programs cannot signal or trace their fork server. Containers that
    share the host's uids but not its /run and /tmp need bases 4096 apart."""
    compile_time_s: float = Field(10.0, gt=0)
    """CPU seconds a C++ or Java program's compilation may take (wall clock: wall_factor × this);
    longer is CE. 10 s: `g++ -O2` of a competitive program that includes <bits/stdc++.h> takes
    about 1 s of CPU and javac about 0.7 s, so this leaves room on a loaded host while a
    template-metaprogramming bomb still stops soon (sandbox/languages.py)."""
    compile_memory_mb: int = Field(1024, ge=64)
    """Memory of a C++ or Java compilation in MiB (g++: its address space per process; javac:
    its heap); more is CE. 1 GiB: cc1plus at -O2 with <bits/stdc++.h> peaks near 200 MiB RSS
    (more address space), javac near 80 MiB."""
    max_code_kb: int = Field(512, ge=1)
    """Source larger than this is rejected as CE without being compiled."""
    retries: int = Field(1, ge=0)
    """How often a solution is re-run after a sandbox/system fault (SE) before SE is reported."""
    extra_ro_paths: list[str] = Field(default_factory=list)
    """Host paths mounted read-only into the sandbox at the same place (e.g. a site-packages
    with numpy). The interpreter's own prefix, /usr and /etc are always mounted."""
    python: str = ""
    """Interpreter that runs the programs; empty = the base interpreter of the judging Python."""
    reward: str = DEFAULT_REWARD
    """The reward function, an import path "pkg.mod:func": called per response with (problem,
    response text, the sandbox's Verdict, or None for a kind the sandbox does not judge) and
    returning a float, or (float, {name: float}) whose named components are logged per step
    (`reward_components`). The default is the code judge's reward (1/0, or the fraction of
    tests passed with `partial_credit`) and the exact-answer check for `answer` problems.
    Checked when the config loads and again at executor start (the module must import on every
    node). A function that raises fails its group, counted as `reward_errors`; the executor
    goes on. See sandbox/rewards/plugin.py."""

    @field_validator("judge_url", mode="before")
    @classmethod
    def _url_list(cls, value: object) -> object:
        """One URL is a list of one; empty strings are dropped (the default, "", is no URL)."""
        if isinstance(value, str):
            value = [value]
        if isinstance(value, (list, tuple)):
            return [v for v in value if not isinstance(v, str) or v.strip()]
        return value

    @field_validator("reward")
    @classmethod
    def _importable_reward(cls, value: str) -> str:
        resolve_reward(value)
        return value
