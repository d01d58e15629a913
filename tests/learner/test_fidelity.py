"""docs/fidelity.md: every key the `microcoder`, `dapo` and `paper` presets set has a row with
the preset's value and a source; the `paper` preset (and compare arm) resolves to the paper's
fixed T = 1.2 with no monitor."""

from __future__ import annotations

from pathlib import Path

import pytest

from microcoder.launch.compare.arms import parse_arm
from microcoder.launch.compare.plan import plan_grid
from microcoder.launch.config import load_config
from microcoder.learner.algorithm.presets import flat_values
from microcoder.learner.config import AlgorithmConfig

REPO = Path(__file__).resolve().parents[2]
COVERED = ("microcoder", "dapo", "paper")
SOURCES = ("**paper**", "**inferred**", "**DAPO**", "**ours**")


def table_rows(text: str) -> dict[str, dict[str, str]]:
    """Every markdown table row of `text` under a `| key | ...` header: key -> {column: cell}."""
    rows: dict[str, dict[str, str]] = {}
    header: list[str] = []
    for line in text.splitlines():
        if not line.startswith("|"):
            header = []
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == "key":
            header = [c.strip("`") for c in cells]
        elif header and not set(cells[0]) <= {"-"}:
            rows[cells[0].strip("`")] = dict(zip(header, cells, strict=True))
    return rows


ROWS = table_rows((REPO / "docs" / "fidelity.md").read_text())


def doc_form(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def test_the_table_parser_reads_rows_and_columns():
    rows = table_rows("| key | `a` | source |\n|---|---|---|\n| `x.y` | 1 | **ours**: z |\n")
    assert rows == {"x.y": {"key": "`x.y`", "a": "1", "source": "**ours**: z"}}


@pytest.mark.parametrize("preset", COVERED)
def test_every_key_a_preset_sets_has_a_row_with_its_value(preset):
    for key, value in flat_values(preset).items():
        assert key in ROWS, f"docs/fidelity.md has no row for `{key}` (preset {preset!r} sets it)"
        assert ROWS[key][preset] == doc_form(value), (preset, key)


def test_a_row_names_no_value_for_a_key_its_preset_leaves_unset():
    for key, row in ROWS.items():
        if key.partition(".")[0] not in AlgorithmConfig.model_fields:
            continue  # not a config key: the diversity metric, the reward
        for preset in COVERED:
            if key not in flat_values(preset):
                assert row[preset] == "—", (preset, key)


def test_every_row_has_a_source():
    assert ROWS, "docs/fidelity.md has no table"
    for key, row in ROWS.items():
        assert row["source"].startswith(SOURCES), f"row `{key}`: source must start with {SOURCES}"


def test_the_default_column_is_the_field_default():
    algo = AlgorithmConfig()
    for key, row in ROWS.items():
        head, _, sub = key.partition(".")
        if head not in AlgorithmConfig.model_fields:
            continue
        value = getattr(getattr(algo, head), sub) if sub else getattr(algo, head)
        assert row["default"] == doc_form(value), key


def test_the_diversity_metric_is_listed_as_ours():
    assert ROWS["diversity"]["source"].startswith("**ours**")
    assert "3-gram Jaccard" in ROWS["diversity"]["microcoder"]


def test_the_paper_preset_samples_at_a_fixed_t_of_1_2():
    t = load_config(None, ["algorithm.preset=paper"]).algorithm
    assert (t.temperature.initial, t.temperature.calibrate) == (1.2, False)
    assert (t.temperature.monitor_window, t.temperature.schedule) == (0, [])
    assert (t.dynamic_filtering, t.truncation_mask, t.kl_coef) == (False, "conditional", 0.0)


def test_the_paper_arm_resolves_over_the_tiny_recipe(tmp_path):
    """tiny-cpu.toml pins temperature.initial = 1.0 and repeat_window = 16; the arm puts the
    paper's values back, as `microcoder compare --arms paper` runs it."""
    recipe = REPO / "configs" / "tiny-cpu.toml"
    grid = plan_grid(recipe, [parse_arm("paper")], [0], [], tmp_path, 1)
    t = load_config(recipe, grid.overrides["paper"]).algorithm
    assert t.preset == "paper" and t.temperature.initial == 1.2
    assert (t.temperature.calibrate, t.temperature.monitor_window) == (False, 0)
    assert t.dynamic_filtering is False and t.repeat_window == 128
