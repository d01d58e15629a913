"""The generator's multi-turn setup without an engine: the engine context a trajectory needs
(actors/trajectory.py `context_tokens`, `engine_context`), and the environments' sandbox made on
the first program run (actors/trajectory.py `EnvSandboxOnDemand`)."""

from __future__ import annotations

import json
import threading

from microcoder.actors import trajectory
from microcoder.actors.config import GeneratorConfig
from microcoder.actors.environments.config import EnvironmentConfig
from microcoder.actors.trajectory import context_tokens, engine_context
from microcoder.learner.models.memory_plan import feedback_tokens


def test_the_context_holds_every_turn_and_the_feedback_between_them():
    single = EnvironmentConfig()
    assert context_tokens(100, 50, single) == 150  # one turn: as before
    two = EnvironmentConfig(kind="repair", max_turns=2, feedback_chars=100)
    assert feedback_tokens(two.feedback_chars) == 4 * 100 + 256
    assert context_tokens(100, 50, two) == 100 + 2 * 50 + 656
    three = EnvironmentConfig(kind="repair", max_turns=3, feedback_chars=100)
    assert context_tokens(100, 50, three) == 100 + 3 * 50 + 2 * 656


def test_the_engine_context_stops_at_the_models_own(tmp_path):
    gen = GeneratorConfig(max_prompt_tokens=192, max_response_tokens=64)
    env = EnvironmentConfig(kind="repair", max_turns=2)
    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 2048}))
    assert context_tokens(192, 64, env) > 2048
    assert engine_context(tmp_path, gen, env) == 2048
    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 32768}))
    assert engine_context(tmp_path, gen, env) == context_tokens(192, 64, env)
    assert engine_context(tmp_path, gen, EnvironmentConfig()) == 256


class _Made:
    """A sandbox that counts its makings (it stands in for the executor pool's sandbox,
    actors/environments/executor_sandbox.py, which needs executors)."""

    made = 0

    def __init__(self):
        _Made.made += 1

    def run(self, problem, code):
        return ("ran", problem, code)


def test_the_sandbox_is_made_once_on_the_first_program_run():
    _Made.made = 0
    lazy = trajectory.EnvSandboxOnDemand(_Made)
    assert _Made.made == 0  # an environment that runs no program needs no executor
    threads = [threading.Thread(target=lazy.run, args=("p", "code")) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert lazy.run("p", "x") == ("ran", "p", "x")
    assert _Made.made == 1
