"""A CPU per judge worker (sandbox/claims.py, `executor.pin_cpus`): claims spread over the CPUs
host-wide, the fork server, its Python programs and its host thread share the worker's CPU (the
pool's caller keeps every CPU), C++ programs keep every CPU, and a pool without a usable lock
folder still judges (unpinned)."""

from __future__ import annotations

import os
import threading

import pytest

from microcoder.data.problem import validate_problem
from microcoder.sandbox import JudgePool, claims
from microcoder.sandbox.languages import missing_tools

from .conftest import _servers, stdin_problem

ALLOWED = claims.allowed_cpus()
AFFINITY = "import os\nprint(sorted(os.sched_getaffinity(0)))\n"


@pytest.fixture
def private_claims(tmp_path, monkeypatch):
    """Claims in a folder of this test's own: other pools on the host (xdist) do not count."""
    folder = tmp_path / "claims"
    monkeypatch.setattr(claims, "CPU_LOCK_DIRS", (str(folder),))
    return folder


def test_claims_go_to_the_least_claimed_cpu_and_come_back_on_release(private_claims):
    held = [claims.claim_cpu((3, 5)) for _ in range(5)]
    assert [c.cpu for c in held] == [3, 5, 3, 5, 3]
    held[1].release()
    held[1].release()  # idempotent
    again = claims.claim_cpu((3, 5))
    assert again.cpu == 5  # the freed place, not a third claim on 3
    nxt = claims.claim_cpu((3, 5))
    assert nxt.cpu == 5  # 3 and 5 both had 3 claims: level 2's first free file is 5's
    for c in [*held, again, nxt]:
        c.release()
    assert sorted(os.listdir(private_claims))[:2] == ["3.0.lock", "3.1.lock"]


def test_a_claim_held_by_another_process_is_skipped(private_claims):
    """flock is per open file: a claim made through another open (as another process holds
    one) is seen; the kernel drops it with its holder."""
    held = claims.claim_cpu((0, 1))
    assert held.cpu == 0
    mine = claims.claim_cpu((0, 1))
    assert mine.cpu == 1
    held.release()
    assert claims.claim_cpu((0, 1)).cpu == 0


def test_no_usable_lock_folder_warns_and_leaves_the_pool_unpinned(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setattr(claims, "CPU_LOCK_DIRS", (str(blocker / "sub"),))
    with pytest.warns(UserWarning, match="unpinned"):
        assert claims.claim_cpu((0,)) is None
    with pytest.warns(UserWarning, match="unpinned"), JudgePool(workers=1) as pool:
        assert pool.workers[0].cpu is None
        v = pool.judge(stdin_problem([("", f"{list(ALLOWED)}\n")]), AFFINITY)
    assert v.verdict == "AC", v  # a program sees every CPU


def _thread_cpus(thread: threading.Thread) -> list[int]:
    with open(f"/proc/self/task/{thread.native_id}/status") as f:
        line = next(x for x in f if x.startswith("Cpus_allowed_list:"))
    return _parse_list(line.split(":", 1)[1].strip())


def _parse_list(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


def test_a_pinned_worker_its_server_programs_and_host_thread_share_one_cpu(private_claims):
    with JudgePool(workers=2) as pool:
        homes = [w.cpu for w in pool.workers]
        assert homes == [ALLOWED[0], ALLOWED[1 % len(ALLOWED)]]  # spread, least claimed first
        # each program runs on its worker's CPU (which worker took it is not known: either)
        got = {pool.judge(stdin_problem([("", "x\n")]), AFFINITY).stdout for _ in range(4)}
        assert got <= {f"[{c}]\n" for c in homes}, got
        servers = _servers(pool)
        assert sorted(sorted(os.sched_getaffinity(s)) for s in servers) == sorted(
            [c] for c in homes
        )
        threads = [t for t in pool._threads if t.is_alive()]
        assert sorted(_thread_cpus(t) for t in threads) == sorted([c] for c in homes)
        assert claims.allowed_cpus() == ALLOWED  # only the pool's own threads were pinned
    assert os.listdir(private_claims)  # the claims were made in the test's folder


def test_unpinned_pool_runs_on_every_cpu(private_claims):
    with JudgePool(workers=1, pin_cpus=False) as pool:
        assert pool.workers[0].cpu is None
        v = pool.judge(stdin_problem([("", f"{list(ALLOWED)}\n")]), AFFINITY)
        assert v.verdict == "AC", v
        assert [os.sched_getaffinity(s) for s in _servers(pool)] == [set(ALLOWED)]
    assert not private_claims.exists()  # nothing claimed


@pytest.mark.skipif(bool(missing_tools(["cpp"])), reason="no C++ toolchain")
def test_a_compiled_program_of_a_pinned_worker_sees_every_cpu(private_claims):
    code = (
        "#include <sched.h>\n#include <cstdio>\nint main() { cpu_set_t s; "
        'sched_getaffinity(0, sizeof s, &s); printf("%d\\n", CPU_COUNT(&s)); }\n'
    )
    row = {"id": "aff", "kind": "stdin", "language": "cpp"}
    problem = validate_problem({**row, "tests": [{"input": "", "output": f"{len(ALLOWED)}\n"}]})
    with JudgePool(workers=1, time_limit_s=5.0) as pool:
        assert pool.workers[0].cpu is not None
        v = pool.judge(problem, code)
    assert v.verdict == "AC", v
