"""The problem-file formats by name, with no loader imported: the command line's `--format` help
(launch/cliargs.py) and the config's `data.format` (data/config.py) read them here, and
data/formats/loaders.py registers one converter under each (tests/launch/test_cliargs.py keeps
the two equal)."""

LOADER_NAMES = (
    "jsonl",
    "lcb",
    "humaneval",
    "leetcodedataset",
    "apps",
    "taco",
    "rllm",
    "codecontests",
    "answer",
)
"""Every loader's name, in data/formats/loaders.py CONVERTERS' order."""
FORMAT_ALIASES = {"microcoder": "jsonl", "livecodebench": "lcb"}
"""Other names a format goes by (a run's `data.format` accepts them too)."""
FORMAT_CHOICES = ("auto", *LOADER_NAMES, *FORMAT_ALIASES)
"""Every name `format=` / `data.format` accepts."""
