"""The run's problem store (data/store.py): one streaming pass per source into SQLite, read by id
from any process, cached by content key; prompts measured into it under a measurement key."""

from __future__ import annotations

import gzip
import json
import os
import pickle
import sqlite3

import pytest

from microcoder.data.config import DataSourceConfig
from microcoder.data.formats.loaders import load_problems
from microcoder.data.problem import ProblemFormatError
from microcoder.data.store import (
    ProblemStore,
    StorePromptTable,
    StoreTableSpec,
    build_store,
    measure_key,
    measure_store,
    over_limit,
)

QUIET = dict(log=lambda _m: None)


def good_rows(fixture_path, name, tmp_path):
    """The fixture's rows the strict loader accepts, as a file of their own."""
    src = fixture_path(name)
    bad = {r.line for r in load_problems(src, strict=False).rejects}
    out = tmp_path / name
    if src.suffix == ".json":  # a JSON array: positions are row indices
        rows = json.loads(src.read_text())
        out.write_text(json.dumps([r for i, r in enumerate(rows, 1) if i not in bad]))
        return out
    lines = src.read_text().splitlines()
    out.write_text("".join(f"{x}\n" for i, x in enumerate(lines, 1) if i not in bad))
    return out


@pytest.mark.parametrize(
    "name",
    [
        "own.jsonl",
        "apps.jsonl",
        "humaneval.jsonl",
        "lcb.jsonl",
        "leetcodedataset.jsonl",
        "rllm.json",
    ],
)
def test_every_field_of_every_problem_round_trips(fixture_path, tmp_path, name):
    path = good_rows(fixture_path, name, tmp_path)
    expected = load_problems(path)
    assert expected
    store_path, built = build_store(
        [DataSourceConfig(path=str(path))], 0, 0.0, tmp_path / "s", **QUIET
    )
    assert built
    store = ProblemStore(store_path)
    assert len(store) == len(expected)
    for p in expected:
        assert p.id in store
        assert store.get(p.id) == p
    assert list(store.problems(split="train")) == expected  # row order is file order
    assert store.source_names() == [path.name.removesuffix(".jsonl").removesuffix(".json")]


def test_a_gz_file_and_a_small_chunk_iterate_the_same_rows(fixture_path, tmp_path):
    gz = tmp_path / "own.jsonl.gz"
    gz.write_bytes(gzip.compress(fixture_path("own.jsonl").read_bytes()))
    expected = load_problems(fixture_path("own.jsonl"))
    store = ProblemStore(
        build_store([DataSourceConfig(path=str(gz))], 0, 0.0, tmp_path / "s", **QUIET)[0]
    )
    assert [p for _, p in store.iter_rows(chunk=2)] == expected


def test_the_first_bad_row_stops_the_build_naming_file_and_line(fixture_path, tmp_path):
    with pytest.raises(ProblemFormatError) as err:
        build_store(
            [DataSourceConfig(path=str(fixture_path("own_bad.jsonl")))],
            0,
            0.0,
            tmp_path / "s",
            **QUIET,
        )
    assert "own_bad.jsonl:2" in str(err.value)
    assert not (tmp_path / "s").exists()  # nothing half-built left under the store's name
    assert not list(tmp_path.iterdir())


def test_an_id_repeated_in_one_file_is_an_error(tmp_path):
    row = '{"id": "a", "kind": "stdin", "prompt": "p", "tests": [{"input": "", "output": ""}]}\n'
    f = tmp_path / "dup.jsonl"
    f.write_text(row + row)
    with pytest.raises(ProblemFormatError, match=r"dup.jsonl:2.*duplicate id 'a'"):
        build_store([DataSourceConfig(path=str(f))], 0, 0.0, tmp_path / "s", **QUIET)


def own_row(pid: str, statement: str = "p") -> str:
    return (
        f'{{"id": "{pid}", "kind": "stdin", "prompt": "{statement}", '
        '"tests": [{"input": "", "output": "x"}]}\n'
    )


def test_an_id_clashing_with_an_earlier_source_is_renamed_with_the_source_name(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(own_row("x", "from a") + own_row("y"))
    b.write_text(own_row("x", "from b") + own_row("z"))
    lines = []
    sources = [DataSourceConfig(path=str(a)), DataSourceConfig(path=str(b), name="bee")]
    store = ProblemStore(build_store(sources, 0, 0.0, tmp_path / "s", log=lines.append)[0])
    assert store.get("x").prompt == "from a"
    assert store.get("bee:x").prompt == "from b"
    assert store.get("bee:x").id == "bee:x"
    assert [p.id for p in store.problems(source=1)] == ["bee:x", "z"]
    assert store.source_names() == ["a", "bee"]
    assert any("1 ids" in line and "bee" in line for line in lines)
    with pytest.raises(KeyError, match="add_problems"):
        store.get("nope")


def test_each_source_holds_out_its_own_fraction_by_id(tmp_path):
    from microcoder.data.corpus.holdout import is_held_out

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("".join(own_row(f"a{i}") for i in range(200)))
    b.write_text("".join(own_row(f"b{i}") for i in range(200)))
    sources = [DataSourceConfig(path=str(a), holdout_fraction=0.3), DataSourceConfig(path=str(b))]
    store = ProblemStore(build_store(sources, 0, 0.0, tmp_path / "s", **QUIET)[0])
    held = [p.id for p in store.problems(split="heldout")]
    assert held == [f"a{i}" for i in range(200) if is_held_out(f"a{i}", 0.3)]
    assert 30 < len(held) < 90
    assert store.counts()[1] == {"train": 200, "heldout": 0, "family": 0}
    # the default fraction applies to a source without its own
    store2 = ProblemStore(build_store(sources, 0, 0.5, tmp_path / "s2", **QUIET)[0])
    assert store2.counts()[1]["heldout"] == sum(is_held_out(f"b{i}", 0.5) for i in range(200))


def test_a_fraction_holding_out_every_problem_is_refused(tmp_path):
    a = tmp_path / "a.jsonl"
    a.write_text(own_row("only"))  # crc32 of one id is below 0.99 * 2**32 in all likelihood
    from microcoder.data.corpus.holdout import is_held_out

    assert is_held_out("only", 0.99)
    with pytest.raises(ValueError, match="holds out every one"):
        build_store(
            [DataSourceConfig(path=str(a), holdout_fraction=0.99)], 0, 0, tmp_path / "s", **QUIET
        )


def test_a_synthetic_source_keeps_its_family_held_out_split(tmp_path):
    from microcoder.data.synthetic.tasks import generate_tasks

    store = ProblemStore(
        build_store([DataSourceConfig(path="synthetic")], 3, 0.0, tmp_path / "s", **QUIET)[0]
    )
    assert [p.id for p in store.problems(split="train")] == [
        p.id for p in generate_tasks(3, "train")
    ]
    assert list(store.problems(split="family")) == generate_tasks(3, "heldout")


def test_the_same_key_reuses_the_store_and_a_changed_file_rebuilds_it(tmp_path):
    a = tmp_path / "a.jsonl"
    a.write_text(own_row("x") + own_row("y"))
    sources = [DataSourceConfig(path=str(a))]
    path, built = build_store(sources, 0, 0.0, tmp_path / "s", **QUIET)
    assert built
    mtime = os.stat(path).st_mtime_ns
    assert build_store(sources, 0, 0.0, path, **QUIET) == (path, False)
    assert os.stat(path).st_mtime_ns == mtime
    # another held-out fraction is another key
    assert build_store(sources, 0, 0.2, path, **QUIET)[1]
    a.write_text(own_row("x") + own_row("y") + own_row("z"))
    assert build_store(sources, 0, 0.2, path, **QUIET)[1]
    assert len(ProblemStore(path)) == 3


class CountingRenderer:
    """A PromptRenderer that counts the prompts it renders."""

    def __init__(self, tokenizer):
        from microcoder.data.prompting.render import PromptRenderer

        self.inner = PromptRenderer(tokenizer)
        self.rendered = 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def text(self, problem):
        self.rendered += 1
        return self.inner.text(problem)


@pytest.fixture
def measured(tmp_path, tiny_tokenizer):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(own_row("a1", "short") + own_row("a2", "long " * 300) + own_row("a3", "ok"))
    b.write_text(own_row("b1", "bee"))
    sources = [DataSourceConfig(path=str(a)), DataSourceConfig(path=str(b))]
    path = build_store(sources, 0, 0.0, tmp_path / "s", **QUIET)[0]
    renderer = CountingRenderer(tiny_tokenizer)
    key = measure_key(renderer.inner)
    assert measure_store(path, renderer, key, batch=2, **QUIET)
    return path, renderer, key


def test_prompts_are_measured_once_per_key(measured, tiny_tokenizer):
    path, renderer, key = measured
    assert renderer.rendered == 4
    again = CountingRenderer(tiny_tokenizer)
    assert measure_key(again.inner) == key
    assert not measure_store(path, again, key, **QUIET)
    assert again.rendered == 0
    from microcoder.data.config import PromptConfig
    from microcoder.data.prompting.render import PromptRenderer

    other = PromptRenderer(tiny_tokenizer, PromptConfig(system={"stdin": "Be brief."}))
    assert measure_key(other) != key


def test_the_prompt_table_serves_the_rows_that_fit_in_row_order(measured):
    from microcoder.buffer.prompts import ListPromptTable

    path, renderer, key = measured
    with sqlite3.connect(path) as con:
        tokens = dict(
            con.execute("SELECT p.id, m.tokens FROM prompts m JOIN problems p USING (row)")
        )
    limit = max(tokens["a1"], tokens["a3"], tokens["b1"])
    assert tokens["a2"] > limit
    over = over_limit(path, key, limit)
    assert [pid for pid, _ in over] == ["a2"]
    table = StorePromptTable(path, key, limit)
    store = ProblemStore(path)
    want = {
        "a": [(i, renderer.inner.text(store.get(i))) for i in ("a1", "a3")],
        "b": [("b1", renderer.inner.text(store.get("b1")))],
    }
    ref = ListPromptTable(want)
    assert table.source_names() == ["a", "b"]
    for s in range(2):
        assert [table.item(s, i) for i in range(table.count(s))] == list(
            want[ref.source_names()[s]]
        )
        assert table.fingerprint(s) == ref.fingerprint(s)


def test_the_buffer_hosts_argument_is_a_path_and_a_key(measured):
    from microcoder.actors.buffer_host import open_prompt_table
    from microcoder.data.config import DataConfig

    path, _, key = measured
    spec = StoreTableSpec(str(path), key, 10_000)
    assert len(pickle.dumps(spec)) < 1000
    table = open_prompt_table(spec, DataConfig())
    assert isinstance(table, StorePromptTable)
    assert table.count(0) == 3


@pytest.mark.slow  # two spawned processes import transformers
def test_the_process_pool_measures_what_the_serial_pass_does(tmp_path, tiny_tokenizer, monkeypatch):
    from microcoder.data import store
    from microcoder.data.prompting.render import PromptRenderer

    monkeypatch.setattr(store, "_BLOCK", 8)  # 4 blocks over 2 workers

    a = tmp_path / "a.jsonl"
    a.write_text("".join(own_row(f"a{i}", "word " * (i % 7)) for i in range(30)))
    renderer = PromptRenderer(tiny_tokenizer)
    key = measure_key(renderer)
    tables = []
    for name, kw in (("serial", {}), ("pool", {"workers": 2, "parallel_from": 1})):
        path = build_store([DataSourceConfig(path=str(a))], 0, 0.0, tmp_path / name, **QUIET)[0]
        lines = []
        assert measure_store(path, renderer, key, log=lines.append, **kw)
        assert ("on 2 processes" in lines[-1]) == (name == "pool")
        with sqlite3.connect(path) as con:
            tables.append(
                con.execute("SELECT row, tokens, text FROM prompts ORDER BY row").fetchall()
            )
    assert len(tables[0]) == 30
    assert tables[0] == tables[1]


def test_a_launch_parses_the_problem_file_once_and_a_resume_not_at_all(
    tmp_path, tiny_tokenizer, monkeypatch
):
    """The preflight's check is the store's build; the bring-up's prepare reuses the store and a
    second prepare (a resume) reuses the measurement too."""
    from microcoder.data import store
    from microcoder.launch.config import load_config
    from microcoder.launch.run.command import check_problem_source
    from microcoder.launch.run.problems import prepare_run_problems

    src = tmp_path / "p.jsonl"
    src.write_text("".join(own_row(f"p{i}", "word " * i) for i in range(40)))
    cfg = load_config(None, [f'data.source="{src}"', "eval.holdout_fraction=0.2"])
    parses = []
    real = store.iter_problems  # the store's pass over the file (data/formats/loaders.py)
    monkeypatch.setattr(store, "iter_problems", lambda *a, **k: parses.append(a) or real(*a, **k))
    run_dir = tmp_path / "run"
    assert check_problem_source(cfg, run_dir) == ""
    first = prepare_run_problems(cfg, tiny_tokenizer, run_dir, log=lambda _m: None)
    again = prepare_run_problems(cfg, tiny_tokenizer, run_dir, log=lambda _m: None)
    assert len(parses) == 1
    assert first.prompts() == again.prompts()
    held = {p.id for p in first.heldout}
    assert held and not held & {pid for pid, _ in first.prompts()}
    assert first.total + len(held) == 40
