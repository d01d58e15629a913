"""Arguments shared by the commands that read a config (standard library only: `--help` stays instant)."""

from __future__ import annotations

from microcoder.data.formats.names import LOADER_NAMES


def add_set_argument(
    parser,
    example: str = "learner.lr=1e-6",
    *,
    flag: str = "--set",
    dest: str = "overrides",
    help: str = "",
) -> None:
    """The `--set KEY=VALUE` option every config-reading command takes (repeatable), into
    `args.overrides`; another repeatable KEY=VALUE option with `flag`, `dest` and `help` (a
    bench's settings of the runs it launches, the warm start's settings)."""
    parser.add_argument(
        flag,
        dest=dest,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=help or f"override a config field, e.g. --set {example} (repeatable)",
    )


PROBLEM_FORMATS = LOADER_NAMES
"""The loaders' names as `--format` lists them (data/formats/names.py; no loader is imported)."""


def add_format_argument(parser) -> None:
    """`--format NAME`: the loader of a command's problem file (`eval`, `judge`, `data filter`,
    `data stats`, `prompts show`), into `args.format`; auto detects it from the file's first row."""
    parser.add_argument(
        "--format",
        default="auto",
        help=f"problem file format: auto (from its first row), {', '.join(PROBLEM_FORMATS)} "
        "(default auto)",
    )


def add_recipe_arguments(parser, example: str = "learner.lr=1e-6") -> None:
    """A positional recipe (default: the embedded tiny-cpu one) plus `--set`."""
    parser.add_argument(
        "config",
        nargs="?",
        default="configs/tiny-cpu.toml",
        help="recipe (default configs/tiny-cpu.toml)",
    )
    add_set_argument(parser, example)


def add_actor_counts(group) -> None:
    """`--generators N --executors N`: the actors of the eval path (`eval`, `data filter`)."""
    group.add_argument("--generators", type=int, default=1, help="vLLM generator actors (1)")
    group.add_argument("--executors", type=int, default=1, help="judge executor actors (1)")


def add_eval_config(group) -> None:
    """`--config FILE` and `--set`: the config of the eval path's actors (`eval`, `data filter`)."""
    group.add_argument("--config", help="TOML config ([generator], [executor], [prompt], [model])")
    add_set_argument(group, "executor.workers=4")
