"""Why a replica failed reaches the launcher: the exception line of a Ray actor error, and the
errors live replicas report in their stats, each logged once."""

from __future__ import annotations

from microcoder.launch.run.pools import Pool, error_summary

RAY_TEXT = """ray::Generator.run() (pid=4242, ip=127.0.0.1, actor_id=abc, repr=<Generator>)
  File "/x/actors/generator.py", line 120, in run
    return self._run(max_waves)
  File "/x/vllm/engine.py", line 88, in _validate
    raise ValueError(msg)
ValueError: The decoder prompt (length 9000) is longer than the maximum model length of 1536."""


class FakeRayError(Exception):
    def __str__(self) -> str:
        return RAY_TEXT


def test_the_summary_of_a_ray_actor_error_is_its_exception_line():
    assert error_summary(FakeRayError()) == (
        "ValueError: The decoder prompt (length 9000) is longer than the maximum model length "
        "of 1536."
    )


def test_an_error_without_a_traceback_keeps_its_first_line():
    assert error_summary(RuntimeError("the actor died unexpectedly\nmore")) == (
        "the actor died unexpectedly"
    )


def test_reported_errors_are_returned_once_and_kept_for_status():
    pool = Pool("generator", make=lambda name: None, release=lambda name: "")
    stats = [{"name": "generator-0", "errors": [[1.0, "generator-0: prompt of 'p' failed"]]}]
    assert pool.report_errors(stats) == ["generator-0: prompt of 'p' failed"]
    assert pool.report_errors(stats) == []
    stats[0]["errors"].append([2.0, "generator-0: another"])
    assert pool.report_errors(stats) == ["generator-0: another"]
    assert pool.errors == ["generator-0: prompt of 'p' failed", "generator-0: another"]
