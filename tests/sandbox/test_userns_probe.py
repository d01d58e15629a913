"""A host where bubblewrap cannot create a user namespace fails once, when the pool (the
executor) starts, naming the cause and both ways out; never program by program. The failing
host is a stand-in bwrap binary (MICROCODER_BWRAP) that refuses as bwrap does in a container."""

from __future__ import annotations

import pytest

from microcoder.actors.executor import Executor
from microcoder.sandbox import ExecutorConfig, JudgePool, SandboxUnavailable
from microcoder.sandbox.bwrap import BWRAP_ENV, userns_probe

REFUSING_BWRAP = """#!/bin/sh
echo probe >> {log}
echo "bwrap: No permissions to creating new namespace, likely because the kernel does not allow non-privileged user namespaces." >&2
exit 1
"""


@pytest.fixture
def refusing_bwrap(tmp_path, monkeypatch):
    log = tmp_path / "calls"
    script = tmp_path / "bwrap"
    script.write_text(REFUSING_BWRAP.format(log=log))
    script.chmod(0o755)
    monkeypatch.setenv(BWRAP_ENV, str(script))
    userns_probe.cache_clear()
    yield log
    userns_probe.cache_clear()


def test_the_pool_refuses_to_start_naming_the_cause_and_both_ways_out(refusing_bwrap):
    with pytest.raises(SandboxUnavailable) as err:
        JudgePool(ExecutorConfig(workers=2))
    message = str(err.value)
    assert "cannot create a user namespace" in message
    assert "No permissions to creating new namespace" in message  # bwrap's own words
    assert 'isolation = "none"' in message and 'backend = "http"' in message
    with pytest.raises(SandboxUnavailable):  # a second pool: the same answer, no new probe
        JudgePool(ExecutorConfig(workers=2))
    assert refusing_bwrap.read_text().splitlines() == ["probe"]  # one probe, no worker started


def test_the_executor_fails_at_start_and_isolation_none_still_runs(refusing_bwrap):
    with pytest.raises(SandboxUnavailable, match="cannot create a user namespace"):
        Executor("exec-u", ExecutorConfig(workers=1))
    with pytest.warns(UserWarning), JudgePool(ExecutorConfig(workers=1, isolation="none")) as pool:
        assert pool.size == 1  # the first way out needs no bubblewrap at all


def test_a_host_that_allows_user_namespaces_passes_the_probe():
    userns_probe.cache_clear()
    assert userns_probe("bwrap") == ""
