"""The launch's pre-start checks (launch/run/command.py: preflight_errors) refuse an
`environment.kind` whose class the launcher cannot import, before any actor starts, naming the
module and the fix; built-ins and an importable user class pass."""

from __future__ import annotations

from pathlib import Path

from microcoder.launch.config import load_config
from microcoder.launch.run.command import environment_errors

TINY_CPU = Path(__file__).resolve().parents[2] / "configs" / "tiny-cpu.toml"


def _errors(kind: str) -> list[str]:
    return environment_errors(load_config(TINY_CPU, [f'environment.kind="{kind}"']))


def test_built_ins_and_an_importable_user_class_pass():
    assert _errors("single") == [] == _errors("repair")
    assert _errors("user_envs:TwoTurnEcho") == []  # tests/support is on the tests' path


def test_a_module_that_does_not_import_is_refused_naming_it_and_pythonpath():
    (err,) = _errors("no_such_env_module:Env")
    assert "cannot import module 'no_such_env_module'" in err and "PYTHONPATH" in err


def test_a_name_that_is_not_an_environment_class_is_refused():
    (err,) = _errors("user_envs:echo_reward")
    assert "not a subclass of" in err and "Environment" in err
