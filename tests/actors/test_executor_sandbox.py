"""ExecutorSandbox (actors/environments/executor_sandbox.py) on real Ray with real Executor
actors and their bubblewrap pools: the run's executors are found by name, calls spread over
them, a dead one is retried on another, and every call has a deadline."""

from __future__ import annotations

import time

import pytest

from microcoder.actors.environments.executor_sandbox import EnvSandboxError, ExecutorSandbox
from microcoder.data.problem import Problem

pytestmark = pytest.mark.slow

ADD = Problem(
    "add",
    "stdin",
    "Add.",
    [{"input": "1 2\n", "output": "3\n"}, {"input": "2 5\n", "output": "7\n"}],
    public_tests=[{"input": "1 2\n", "output": "3\n"}],
    meta={"solution": "x" * 10_000},
)
RIGHT = "a, b = map(int, input().split())\nprint(a + b)\n"
WRONG = (
    "import sys\na, b = map(int, input().split())\nprint(a * b)\nprint('oops', file=sys.stderr)\n"
)
NAMES = ("mc-executor-0", "mc-executor-1")


@pytest.fixture(scope="module")
def executors(ray_cluster):
    from microcoder.actors.remote import executor_cls
    from microcoder.sandbox.config import ExecutorConfig

    ray = ray_cluster
    cfg = ExecutorConfig(workers=1, cpus_per_executor=1)
    handles = [executor_cls(cfg).options(name=n).remote(n[3:], cfg) for n in NAMES]
    ray.get([h.ready.remote() for h in handles], timeout=120)
    yield ray, dict(zip(NAMES, handles, strict=True))
    for h in handles:
        ray.kill(h)


def env_runs(ray, handle) -> int:
    return ray.get(handle.stats.remote(), timeout=30)["env_runs"]


def test_runs_are_judged_by_the_named_executors_in_turn(executors):
    ray, handles = executors
    sandbox = ExecutorSandbox(timeout_s=60)  # finds mc-executor-* by itself
    ok = sandbox.run(ADD, RIGHT)
    wa = sandbox.run(ADD, WRONG)
    none = sandbox.run(ADD, None)
    assert (ok.verdict, ok.passed, ok.total, ok.first_failed) == ("AC", 2, 2, None)
    assert (wa.verdict, wa.passed, wa.first_failed, wa.stdout) == ("WA", 0, 0, "2\n")
    assert "oops" in wa.stderr and wa.message
    assert none.verdict == "WA"
    assert sorted(env_runs(ray, h) for h in handles.values()) == [1, 2]  # spread over both


def test_a_generator_actor_reaches_them_by_name(executors):
    ray, _ = executors

    @ray.remote(num_cpus=0)
    class Caller:
        def __init__(self):
            self.sandbox = ExecutorSandbox(timeout_s=60)

        def run(self, problem, code):
            return self.sandbox.run(problem, code)

    caller = Caller.remote()
    assert ray.get(caller.run.remote(ADD, RIGHT), timeout=60).verdict == "AC"
    ray.kill(caller)


def test_a_repair_trajectory_in_an_actor_runs_its_turns_on_the_executors(executors):
    """The generator's case whole: a Repair environment built in an actor, its sandbox the
    executors; the feedback shows the visible test and never the hidden one."""
    ray, _ = executors

    @ray.remote(num_cpus=0)
    def two_turns(problem):
        from microcoder.actors.environments.base import EnvContext, build_environment
        from microcoder.actors.environments.config import EnvironmentConfig

        config = EnvironmentConfig(kind="repair", max_turns=2)
        prompt = lambda p: [{"role": "user", "content": p.prompt}]  # noqa: E731
        env = build_environment(EnvContext(config, ExecutorSandbox(timeout_s=60), prompt))
        messages = env.reset(problem)
        first = env.step(messages, f"```python\n{WRONG}```")
        messages += [{"role": "assistant", "content": "..."}, *first.feedback]
        return first, env.step(messages, f"```python\n{RIGHT}```")

    first, second = ray.get(two_turns.remote(ADD), timeout=120)
    assert (first.done, first.passed) == (False, False)
    text = first.feedback[0]["content"]
    assert "visible test 1 of 1: wrong answer (WA)" in text and "1 2" in text and "oops" in text
    assert "2 5" not in text and "7" not in text  # the hidden test (not a public one)
    assert (second.done, second.passed, second.metrics["visible_passed"]) == (True, True, 1.0)


def test_no_executor_is_an_error_naming_what_to_check():
    sandbox = ExecutorSandbox(timeout_s=1.0, prefix="mc-nobody-")
    start = time.monotonic()
    with pytest.raises(EnvSandboxError, match="'mc-nobody-' was not found within 1 s"):
        sandbox.run(ADD, RIGHT)
    assert time.monotonic() - start < 10


def test_a_dead_executor_is_retried_on_another(executors):
    ray, handles = executors
    sandbox = ExecutorSandbox(timeout_s=60, names=NAMES)
    assert sandbox.run(ADD, RIGHT).verdict == "AC"  # mc-executor-0; both handles known
    ray.kill(handles["mc-executor-1"], no_restart=True)
    assert sandbox.run(ADD, RIGHT).verdict == "AC"  # mc-executor-1 first: dead, then -0
    assert sandbox.retries == 1 and sandbox.errors == 0
    assert sandbox.run(ADD, RIGHT).verdict == "AC"
    assert sandbox.retries == 1  # the dead one was dropped from the list


def test_handles_of_unnamed_executors_do_without_names(executors):
    """Last but one: mc-executor-1 is dead since the test above."""
    ray, handles = executors
    sandbox = ExecutorSandbox(
        timeout_s=60, handles={"a": handles["mc-executor-1"], "b": handles["mc-executor-0"]}
    )
    for _ in range(3):
        assert sandbox.run(ADD, RIGHT).verdict == "AC"
    assert sandbox.retries == 1  # "a" once, then never again
    alone = ExecutorSandbox(timeout_s=1.0, handles={"a": handles["mc-executor-1"]})
    with pytest.raises(EnvSandboxError, match=r"a live one of the executors \['a'\]"):
        alone.run(ADD, RIGHT)  # it died on the first try, and there is no other
    assert alone.retries == 1
    dead = handles["mc-executor-1"]
    twice = ExecutorSandbox(timeout_s=30, handles={"a": dead, "b": dead})
    run = twice.run(ADD, RIGHT)  # both tries die: SE, no verdict made up
    assert run.verdict == "SE" and "executors a, b died" in run.message


def test_a_call_past_its_deadline_is_a_sandbox_error(executors):
    """Last: its program holds mc-executor-0's one worker for a while."""
    slow = Problem("slow", "stdin", "x", [{"input": "", "output": "1\n"}], time_limit_s=20)
    sandbox = ExecutorSandbox(timeout_s=2.0, names=["mc-executor-0"])
    start = time.monotonic()
    run = sandbox.run(slow, "import time\ntime.sleep(30)\nprint(1)\n")
    assert run.verdict == "SE" and "executor-0: 1 programs not judged within" in run.message
    assert time.monotonic() - start < 8
