"""The shared `--format` option: every command that reads a problem file declares it the same
way, and its help lists exactly the loaders there are."""

from __future__ import annotations

import argparse

import pytest

from microcoder.data.formats.loaders import FORMATS
from microcoder.launch.cli.main import build_parser
from microcoder.launch.cliargs import PROBLEM_FORMATS

COMMANDS = [("eval",), ("judge",), ("data", "filter"), ("data", "stats"), ("prompts", "show")]


def _subparser(parser: argparse.ArgumentParser, names: tuple[str, ...]) -> argparse.ArgumentParser:
    for name in names:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return parser


def _format_option(names: tuple[str, ...]) -> argparse.Action:
    parser = _subparser(build_parser(), names)
    return next(a for a in parser._actions if "--format" in a.option_strings)


def test_the_listed_formats_are_the_loaders():
    assert PROBLEM_FORMATS == FORMATS


@pytest.mark.parametrize("names", COMMANDS, ids=" ".join)
def test_each_command_names_every_loader(names):
    option = _format_option(names)
    assert (option.dest, option.default) == ("format", "auto")
    for name in ("auto", *FORMATS):
        assert name in option.help, f"{' '.join(names)} --format does not name {name}"


def test_one_help_for_all():
    assert len({_format_option(names).help for names in COMMANDS}) == 1
