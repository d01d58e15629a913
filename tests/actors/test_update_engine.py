"""The update sequence of a running engine (actors/weights/publisher.py: update_engine), on a
recording stand-in engine: the order of the steps, resume on every path, errors that name the
failed step."""

from __future__ import annotations

import pytest

from microcoder.actors.weights.publisher import update_engine


class Recorder:
    """An engine that records its calls; `reset_ok` is what reset_prefix_cache reports."""

    def __init__(self, reset_ok: bool = True):
        self.calls: list[str] = []
        self.reset_ok = reset_ok

    def pause(self, mode: str, clear_cache: bool = True) -> None:
        self.calls.append(f"pause:{mode}" + ("" if clear_cache else ":kv-kept"))

    def set_version(self, v: int) -> None:
        self.calls.append(f"version:{v}")

    def reset_prefix_cache(self) -> bool:
        self.calls.append("reset")
        return self.reset_ok

    def resume(self) -> None:
        self.calls.append("resume")


def test_a_load_runs_between_pause_and_resume_and_the_label_is_set_before_the_reset():
    eng = Recorder()

    def load():
        eng.calls.append("load")
        return {"version": 3}

    result, pause_s = update_engine(eng, "keep", load, "gen-0: update to 3")
    assert result["version"] == 3 and result["reset_prefix_cache_s"] >= 0 and pause_s >= 0
    assert eng.calls == ["pause:keep", "load", "version:3", "reset", "resume"]


def test_nothing_newer_still_resumes_and_sets_no_label():
    eng = Recorder()
    result, _ = update_engine(eng, "wait", lambda: None, "gen-0")
    assert result is None
    assert eng.calls == ["pause:wait", "resume"]


def test_a_failing_load_resumes_the_engine_and_names_the_step():
    eng = Recorder()

    def load():
        raise ConnectionError("rank 0 went away")

    with pytest.raises(RuntimeError) as err:
        update_engine(eng, "keep", load, "gen-0: weight update to version 2")
    msg = str(err.value)
    assert "gen-0: weight update to version 2 failed at pull_weights" in msg
    assert "ConnectionError: rank 0 went away" in msg
    assert eng.calls[-1] == "resume"


def test_a_prefix_cache_that_cannot_be_reset_is_an_error_that_says_why():
    eng = Recorder(reset_ok=False)
    with pytest.raises(RuntimeError, match="failed at reset_prefix_cache.*old weights"):
        update_engine(eng, "keep", lambda: {"version": 1}, "gen-0")
    assert eng.calls[-1] == "resume"


def test_reusing_the_kept_kv_pauses_without_clearing_and_skips_the_reset():
    eng = Recorder(reset_ok=False)  # a reset would fail: the kept requests hold their blocks
    result, _ = update_engine(eng, "keep", lambda: {"version": 2}, "gen-0", kv="reuse")
    assert eng.calls == ["pause:keep:kv-kept", "version:2", "resume"]
    assert result["version"] == 2


def test_a_wait_pause_clears_the_caches_even_when_reuse_is_asked():
    """Nothing is kept through a "wait" pause, so there is no KV to reuse: the caches clear."""
    eng = Recorder()
    update_engine(eng, "wait", lambda: {"version": 1}, "gen-0", kv="reuse")
    assert eng.calls == ["pause:wait", "version:1", "reset", "resume"]


def test_an_unknown_kv_mode_is_refused_before_the_engine_pauses():
    eng = Recorder()
    with pytest.raises(ValueError, match="recompute, reuse"):
        update_engine(eng, "keep", lambda: {"version": 1}, "gen-0", kv="drop")
    assert eng.calls == []
