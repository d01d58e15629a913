"""The generator's multi-turn setup without an engine: the engine context a trajectory needs
(actors/trajectory.py `context_tokens`, `engine_context`), and the environments' sandbox made on
the first program run (actors/trajectory.py `EnvSandboxOnDemand`)."""

from __future__ import annotations

import json
import sys
import threading
import types

import pytest

from microcoder.actors import trajectory
from microcoder.actors.config import GeneratorConfig
from microcoder.actors.environments.config import EnvironmentConfig
from microcoder.actors.trajectory import context_tokens, engine_context, feedback_token_budget


def test_the_context_holds_every_turn_and_the_feedback_between_them():
    single = EnvironmentConfig()
    assert context_tokens(100, 50, single) == 150  # one turn: as before
    two = EnvironmentConfig(kind="repair", max_turns=2, feedback_chars=100)
    assert feedback_token_budget(two) == 4 * 100 + 256
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
    """A sandbox class that counts its instances (the module stands in for the executor pool's
    sandbox, actors/environments/executor_sandbox.py, which needs executors)."""

    made: list = []

    def __init__(self, config):
        _Made.made.append(config)

    def run(self, problem, code):
        return ("ran", problem, code)


@pytest.fixture
def sandbox_module(monkeypatch):
    module = types.ModuleType("mc_test_sandbox")
    module.ExecutorSandbox = _Made
    monkeypatch.setitem(sys.modules, "mc_test_sandbox", module)
    monkeypatch.setattr(trajectory, "SANDBOX_MODULE", "mc_test_sandbox")
    _Made.made = []


def test_the_sandbox_is_made_once_on_the_first_program_run(sandbox_module):
    cfg = EnvironmentConfig(kind="repair")
    lazy = trajectory.EnvSandboxOnDemand(cfg)
    assert _Made.made == []  # an environment that runs no program needs no executor
    threads = [threading.Thread(target=lazy.run, args=("p", "code")) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert lazy.run("p", "x") == ("ran", "p", "x")
    assert _Made.made == [cfg]
