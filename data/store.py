"""The run's problem store: every problem of `data.sources` in one SQLite file in the run
directory (RUN_DIR/problems.sqlite), written in one streaming pass and read by id from any
process.

    build_store(cfg.data.source_list(), seed, holdout, run_dir / STORE_NAME, log)  # the driver
    store = ProblemStore(path)          # an executor: read-only, opens in milliseconds
    store.get("two-sum") -> Problem

Why SQLite (stdlib, no new dependency): random access by id from many processes at once,
read-only opens, and one pass converts any loader format (JSONL, JSON arrays, `.gz`, every
converter of data/formats/loaders.py) row by row, so no process holds the file's problems.

Tables:
- `meta(name, value)`: the build key, the sources' names, the schema version, the programs'
  languages (`languages`, a JSON list; a store written before it has only Python).
- `problems(row, source, id UNIQUE, split, problem)`: one row per problem in source then file
  order; `problem` is the zlib-compressed JSON of its Problem. `split`: `train`, `heldout` (the
  source's `holdout_fraction`, else the default one, chosen by id: data/corpus/holdout.py) or
  `family` (a bundled synthetic family's own held-out split).
- `measures(key, done)` and `prompts(key, row, tokens, text)`: rendered prompt texts
  (zlib-compressed) and their token counts under a measurement key (template, system prompts,
  chat-template arguments, tokenizer: `measure_key`), written by `measure_store`.

The build key hashes the schema version and each source's name, format, held-out fraction and
content (blake2b of the file, streamed; a synthetic family's name and the seed): a store in the
run directory with the same key is reused (a `--resume`), another key rebuilds it (written to a
temporary name and renamed, so a reader never sees half a store).
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import sqlite3
import sys
import threading
import time
import zlib
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from pathlib import Path

import numpy as np

from microcoder.data.config import DataSourceConfig
from microcoder.data.corpus.holdout import is_held_out
from microcoder.data.formats.loaders import iter_problems
from microcoder.data.problem import Problem
from microcoder.data.prompting import render, templates
from microcoder.data.prompting.render import PromptRenderer
from microcoder.data.sources import is_synthetic, synthetic_variant

SCHEMA_VERSION = 1
STORE_NAME = "problems.sqlite"
"""The store's file name in the run directory."""
SPLITS = ("train", "heldout", "family")
_CHUNK = 512
_SCHEMA = """
CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE problems (
    row INTEGER PRIMARY KEY, source INTEGER NOT NULL, id TEXT NOT NULL UNIQUE,
    split TEXT NOT NULL, problem BLOB NOT NULL);
CREATE TABLE measures (key TEXT PRIMARY KEY, done INTEGER NOT NULL);
CREATE TABLE prompts (
    key TEXT NOT NULL, row INTEGER NOT NULL, tokens INTEGER NOT NULL, text BLOB NOT NULL,
    PRIMARY KEY (key, row)) WITHOUT ROWID;
"""


_FIELDS = tuple(f.name for f in fields(Problem))


def _encode(problem: Problem) -> bytes:
    # a shallow dict: dataclasses.asdict deep-copies every test and was 70 % of a build
    row = {name: getattr(problem, name) for name in _FIELDS}
    return zlib.compress(json.dumps(row, ensure_ascii=False).encode(), 1)


def _decode(blob: bytes) -> Problem:
    return Problem(**json.loads(zlib.decompress(blob)))


_HASHED: dict[tuple, str] = {}


def _file_hash(path: Path) -> str:
    """blake2b of the file's bytes, streamed; remembered in this process by (path, inode,
    size, mtime), so the launch's preflight and its bring-up read a big file once."""
    st = path.stat()
    seen = (str(path.resolve()), st.st_ino, st.st_size, st.st_mtime_ns)
    if seen in _HASHED:
        return _HASHED[seen]
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    _HASHED[seen] = h.hexdigest()
    return _HASHED[seen]


class NoTrainingProblems(ValueError):
    """A source left with no training problem: every one held out (`held_out` > 0, the
    source's holdout fraction is the fix), or the source holds none."""

    def __init__(self, name: str, path: str, fraction: float, held_out: int):
        why = f": holdout fraction {fraction} holds out every one of them; lower it"
        super().__init__(
            f"data source {name!r} ({path}): no training problem" + (why if held_out else "")
        )
        self.held_out = held_out


def store_key(sources: Sequence[DataSourceConfig], seed: int, default_holdout: float) -> str:
    """The build key of a store of `sources` (see the module docstring); reads every file."""
    parts: list = [SCHEMA_VERSION]
    for s in sources:
        fraction = s.holdout_fraction if s.holdout_fraction is not None else default_holdout
        content = f"synthetic:{s.path}:{seed}" if is_synthetic(s.path) else ""
        if not content:
            path = Path(s.path)
            if not path.is_file():
                raise FileNotFoundError(f"{path}: no such problem file")
            content = _file_hash(path)
        parts.append([s.display_name(), s.format, fraction, content])
    return hashlib.blake2b(json.dumps(parts).encode(), digest_size=16).hexdigest()


def read_meta(path: str | Path) -> dict[str, str]:
    """The `meta` table of the store at `path` ({} when there is no readable store)."""
    if not Path(path).is_file():
        return {}
    try:
        con = sqlite3.connect(_ro_uri(path), uri=True)
        try:
            return dict(con.execute("SELECT name, value FROM meta"))
        finally:
            con.close()
    except sqlite3.DatabaseError:
        return {}


def _ro_uri(path: str | Path) -> str:
    return Path(path).resolve().as_uri() + "?mode=ro"


def _source_rows(
    source: DataSourceConfig, seed: int
) -> Iterator[tuple[Problem, str | None, Callable[[], int]]]:
    """(problem, forced split or None, bytes read so far) per row of `source`."""
    if is_synthetic(source.path):
        family = synthetic_variant(source.path)
        for split, label in (("train", None), ("heldout", "family")):
            for p in family.generate_tasks(seed, split=split):
                yield p, label, lambda: 0
        return

    position = _ReadPosition()  # how far the loader has read, for the progress line
    for _line, p in iter_problems(source.path, source.format):
        yield p, None, position


class _ReadPosition:
    """Bytes this process has read since the source's start (/proc/self/io: the file's bytes
    and little else during a build; 0 where unavailable)."""

    def __init__(self):
        self.start = self._read_bytes()

    @staticmethod
    def _read_bytes() -> int:
        try:
            with open("/proc/self/io") as f:
                for line in f:
                    if line.startswith("rchar:"):
                        return int(line.split()[1])
        except OSError:
            pass
        return 0

    def __call__(self) -> int:
        return max(0, self._read_bytes() - self.start)


def build_store(
    sources: Sequence[DataSourceConfig],
    seed: int,
    default_holdout: float,
    path: str | Path,
    log: Callable[[str], None] = print,
    progress_every_s: float = 10.0,
) -> tuple[Path, bool]:
    """Write the problems of `sources` into the SQLite store at `path` in one streaming pass per
    source (see the module docstring); returns (path, whether it was built: False when the store
    there already has this key and was reused). Raises what the loader raises for the first bad
    row (ProblemFormatError naming file:line and field), FileNotFoundError for a missing file,
    ValueError when a source has no training problem left."""
    path = Path(path)
    key = store_key(sources, seed, default_holdout)
    if read_meta(path).get("key") == key:
        return path, False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    con = sqlite3.connect(tmp)
    try:
        con.executescript("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;" + _SCHEMA)
        names = [s.display_name() for s in sources]
        languages: set[str] = set()
        counts = [
            _fill(con, i, s, seed, default_holdout, log, progress_every_s, languages)
            for i, s in enumerate(sources)
        ]
        con.execute("CREATE INDEX by_split ON problems (source, split, row)")
        meta = {
            "key": key,
            "schema": str(SCHEMA_VERSION),
            "sources": json.dumps(names),
            "counts": json.dumps(counts),
            "languages": json.dumps(sorted(languages)),
        }
        con.executemany("INSERT INTO meta VALUES (?, ?)", meta.items())
        con.commit()
    except BaseException:
        con.close()
        tmp.unlink(missing_ok=True)
        raise
    con.close()
    os.replace(tmp, path)
    return path, True


def _fill(
    con: sqlite3.Connection,
    index: int,
    source: DataSourceConfig,
    seed: int,
    default_holdout: float,
    log: Callable[[str], None],
    progress_every_s: float,
    languages: set[str],
) -> dict[str, int]:
    """Insert the rows of source `index`; returns its row count per split and adds the
    languages of its programs to `languages`."""

    name = source.display_name()
    fraction = source.holdout_fraction
    if fraction is None:
        fraction = default_holdout
    total_mb = 0.0 if is_synthetic(source.path) else Path(source.path).stat().st_size / 2**20
    counts = dict.fromkeys(SPLITS, 0)
    renamed = 0
    t0 = last = time.monotonic()
    insert = "INSERT OR IGNORE INTO problems (source, id, split, problem) VALUES (?, ?, ?, ?)"
    for n, (p, forced, read) in enumerate(_source_rows(source, seed), start=1):
        split = forced or ("heldout" if fraction and is_held_out(p.id, fraction) else "train")
        problem_id = p.id
        k = 1
        while con.execute(insert, (index, problem_id, split, _encode(p))).rowcount == 0:
            # an earlier source has this id: `<name>:<id>`, then `<name>:<id>~2`, ...
            k += 1
            problem_id = f"{name}:{p.id}" if k == 2 else f"{name}:{p.id}~{k - 1}"
            p = replace(p, id=problem_id)
        renamed += k > 1
        counts[split] += 1
        languages.add(p.language)
        now = time.monotonic()
        if now - last >= progress_every_s:
            last = now
            mb = read() / 2**20
            of = f" of {total_mb:.0f}" if total_mb else ""
            log(f"problem store: {name}: {n} rows, {mb:.0f}{of} MB read, {now - t0:.0f} s")
    if renamed:
        log(f"problem store: {name}: {renamed} ids another source used first renamed {name}:<id>")
    if not counts["train"]:
        raise NoTrainingProblems(name, source.path, fraction, counts["heldout"])
    log(
        f"problem store: {name}: {sum(counts.values())} problems ({counts['train']} train, "
        f"{counts['heldout'] + counts['family']} held out) in {time.monotonic() - t0:.1f} s"
    )
    return counts


class ProblemStore:
    """A read-only view of a built store: problems by id (a small LRU cache in front), rows by
    source and split in row order, chunk by chunk. Safe to share between threads (one
    connection behind a lock); open one per process (it is not pickled: pass the path)."""

    def __init__(self, path: str | Path, cache: int = 1024):
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(
                f"{self.path}: no problem store; the launcher builds it (data/store.py build_store)"
            )
        self._con = sqlite3.connect(_ro_uri(self.path), uri=True, check_same_thread=False)
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, Problem] = OrderedDict()
        self._cache_size = cache
        self.meta = dict(self._query("SELECT name, value FROM meta"))

    def _query(self, sql: str, args: Sequence = ()) -> list[tuple]:
        with self._lock:
            return self._con.execute(sql, args).fetchall()

    def source_names(self) -> list[str]:
        return json.loads(self.meta["sources"])

    def counts(self) -> list[dict[str, int]]:
        """Rows per split of each source, in source order."""
        return json.loads(self.meta["counts"])

    def __len__(self) -> int:
        return sum(sum(c.values()) for c in self.counts())

    def languages(self) -> list[str]:
        """The languages of the store's programs (a store built before they were recorded:
        Python only, the one language it could hold)."""
        return json.loads(self.meta.get("languages", '["python"]'))

    def __contains__(self, problem_id: object) -> bool:
        if problem_id in self._cache:
            return True
        return bool(self._query("SELECT 1 FROM problems WHERE id = ?", (problem_id,)))

    def get(self, problem_id: str) -> Problem:
        """The problem `problem_id`; KeyError naming the fix when the store has none."""
        with self._lock:
            hit = self._cache.get(problem_id)
            if hit is not None:
                self._cache.move_to_end(problem_id)
                return hit
            row = self._con.execute(
                "SELECT problem FROM problems WHERE id = ?", (problem_id,)
            ).fetchone()
            if row is None:
                raise KeyError(
                    f"problem {problem_id!r} is not in the run's problem store {self.path}; "
                    "register it beside the store (Executor.add_problems) or rebuild the store "
                    "from the run's data.sources"
                )
            problem = _decode(row[0])
            self._cache[problem_id] = problem
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
            return problem

    def iter_rows(
        self, source: int | None = None, split: str | None = None, chunk: int = _CHUNK
    ) -> Iterator[tuple[int, Problem]]:
        """(row number, Problem) of `source`'s `split` rows (None: any) in row order, read
        `chunk` rows at a time."""
        where = ["row > ?"]
        args = []
        if source is not None:
            where.append("source = ?")
            args.append(source)
        if split is not None:
            where.append("split = ?")
            args.append(split)
        sql = f"SELECT row, problem FROM problems WHERE {' AND '.join(where)} ORDER BY row LIMIT ?"
        last = 0
        while rows := self._query(sql, (last, *args, chunk)):
            for row, blob in rows:
                yield row, _decode(blob)
            last = rows[-1][0]

    def problems(self, source: int | None = None, split: str | None = None) -> Iterator[Problem]:
        """The Problems of `iter_rows`."""
        return (p for _, p in self.iter_rows(source, split))

    def close(self) -> None:
        with self._lock:
            self._con.close()


# ------------------------------------------------------------ prompt measurement


def _file_bytes(path: str | Path) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError:
        return b""


def measure_key(renderer) -> str:
    """The measurement key of `renderer` (data/prompting/render.py PromptRenderer): its template
    (name, and the file's contents or the built-in templates' source), `prompt.system`, the
    chat-template arguments and the tokenizer (class, vocabulary, special tokens, chat
    template). Prompts measured under one key are reused by every prepare with that key."""

    tok = renderer.tokenizer
    h = hashlib.blake2b(digest_size=16)
    template = renderer.cfg.template
    body = _file_bytes(template) if Path(template).is_file() else _file_bytes(templates.__file__)
    for part in (
        str(SCHEMA_VERSION),
        template,
        body,
        _file_bytes(render.__file__),
        json.dumps(renderer.cfg.system, sort_keys=True),
        json.dumps(renderer.chat_template_kwargs, sort_keys=True, default=str),
        type(tok).__name__,
        json.dumps(sorted(tok.get_vocab().items())),
        json.dumps(sorted(map(str, getattr(tok, "all_special_tokens", [])))),
        str(getattr(tok, "chat_template", "") or ""),
    ):
        h.update(part if isinstance(part, bytes) else part.encode())
        h.update(b"\x00")
    return h.hexdigest()


PARALLEL_FROM = 20_000
"""Training rows from which `measure_store` renders and counts on a process pool."""
_BLOCK = 2048
_worker: dict = {}


def _measure_rows(renderer, rows: list[tuple[int, bytes]], key: str) -> list[tuple]:
    """(key, row, tokens, compressed text) of each (row, problem blob), one batched
    tokenizer call for all."""
    texts = [renderer.text(_decode(blob)) for _, blob in rows]
    lengths = [len(ids) for ids in renderer.encode_texts(texts)]
    return [
        (key, row, k, zlib.compress(t.encode(), 1))
        for (row, _), t, k in zip(rows, texts, lengths, strict=True)
    ]


def _worker_start(path: str, tokenizer, prompt_cfg, chat_template_kwargs) -> None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # the pool is the parallelism
    _worker["renderer"] = PromptRenderer(tokenizer, prompt_cfg, chat_template_kwargs)
    _worker["con"] = sqlite3.connect(_ro_uri(path), uri=True, timeout=120)


def _worker_block(block: tuple[int, int, str], batch: int = 256) -> list[tuple]:
    """Measure the training rows lo < row <= hi of the store (in a pool worker)."""
    lo, hi, key = block
    rows = (
        _worker["con"]
        .execute(
            "SELECT row, problem FROM problems WHERE split = 'train' AND row > ? AND row <= ? "
            "ORDER BY row",
            (lo, hi),
        )
        .fetchall()
    )
    out = []
    for start in range(0, len(rows), batch):
        out += _measure_rows(_worker["renderer"], rows[start : start + batch], key)
    return out


def measure_store(
    path: str | Path,
    renderer,
    key: str,
    log: Callable[[str], None] = print,
    batch: int = 256,
    progress_every_s: float = 10.0,
    workers: int | None = None,
    parallel_from: int = PARALLEL_FROM,
) -> bool:
    """Render and count the prompt of every training row of the store at `path` under
    measurement key `key` (`measure_key(renderer)`), in batches (one batched tokenizer call
    each), storing (text, token count) per row. From `parallel_from` rows on, blocks of rows
    are measured on a pool of `workers` processes (default min(CPUs, 4); none below 4 CPUs,
    where one process measured 100,000 prompts faster than a pool of 2), each reading the
    store by path; this process only writes. Returns False when the store already holds that
    key's measurement (nothing rendered), True when it measured."""
    con = sqlite3.connect(path)
    try:
        done = con.execute("SELECT done FROM measures WHERE key = ?", (key,)).fetchone()
        if done and done[0]:
            return False
        con.execute("DELETE FROM prompts WHERE key = ?", (key,))
        con.execute("INSERT OR REPLACE INTO measures VALUES (?, 0)", (key,))
        con.commit()
        total = con.execute("SELECT COUNT(*) FROM problems WHERE split = 'train'").fetchone()[0]
        if workers is None:  # on 2-3 cores the batched tokenizer's own threads did better
            cpus = os.cpu_count() or 1
            workers = min(cpus, 4) if cpus >= 4 else 1
        parallel = workers > 1 and total >= parallel_from
        t0 = last = time.monotonic()
        n = 0
        insert = "INSERT INTO prompts VALUES (?, ?, ?, ?)"
        parts = (_pool_parts if parallel else _serial_parts)(
            con, path, renderer, key, batch, workers
        )
        while True:
            try:
                part = next(parts, None)
            except BrokenProcessPool as err:  # e.g. a __main__ script without a main guard
                log(f"measuring prompts: the process pool failed ({err}); measuring in this one")
                con.execute("DELETE FROM prompts WHERE key = ?", (key,))
                parallel = False
                n = 0
                parts = _serial_parts(con, path, renderer, key, batch, workers)
                continue
            if part is None:
                break
            con.executemany(insert, part)
            con.commit()  # the pool's workers read the store between these short writes
            n += len(part)
            now = time.monotonic()
            if now - last >= progress_every_s:
                last = now
                log(f"measuring prompts: {n} of {total} ({now - t0:.0f} s)")
        con.execute("UPDATE measures SET done = 1 WHERE key = ?", (key,))
        con.commit()
        on = f" on {workers} processes" if parallel else ""
        log(f"measured {n} training prompts{on} in {time.monotonic() - t0:.1f} s")
        return True
    finally:
        con.close()


def _serial_parts(con, path, renderer, key: str, batch: int, workers: int) -> Iterator[list]:
    after = 0
    sql = "SELECT row, problem FROM problems WHERE split = 'train' AND row > ? ORDER BY row LIMIT ?"
    while rows := con.execute(sql, (after, batch)).fetchall():
        after = rows[-1][0]
        yield _measure_rows(renderer, rows, key)


def _pool_parts(con, path, renderer, key: str, batch: int, workers: int) -> Iterator[list]:
    (hi,) = con.execute("SELECT MAX(row) FROM problems").fetchone()
    blocks = [(lo, min(lo + _BLOCK, hi), key) for lo in range(0, hi, _BLOCK)]
    init = (str(path), renderer.tokenizer, renderer.cfg, renderer.chat_template_kwargs)
    with ProcessPoolExecutor(
        workers,
        mp_context=multiprocessing.get_context("spawn"),  # the driver has Ray's threads
        initializer=_worker_start,
        initargs=init,
    ) as pool:
        with _main_script_hidden():  # map submits every block: the workers start now
            results = pool.map(_worker_block, blocks)
        yield from results


@contextmanager
def _main_script_hidden() -> Iterator[None]:
    """A spawned worker re-runs the parent's __main__ script unless it is a module (`python -m`,
    a console script's guard): hide the script's path while the pool starts its workers, so
    a caller's script without a main guard does not run again in each of them."""

    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or path is None or getattr(main, "__spec__", None) is not None:
        yield
        return
    del main.__file__
    try:
        yield
    finally:
        main.__file__ = path


def over_limit(path: str | Path, key: str, limit: int) -> list[tuple[str, int]]:
    """(problem id, tokens) of the training rows whose prompt under `key` is over `limit`
    tokens, in row order."""
    con = sqlite3.connect(_ro_uri(path), uri=True)
    try:
        return con.execute(
            "SELECT p.id, m.tokens FROM prompts m JOIN problems p ON p.row = m.row "
            "WHERE m.key = ? AND m.tokens > ? ORDER BY m.row",
            (key, limit),
        ).fetchall()
    finally:
        con.close()


class StorePromptTable:
    """The buffer's PromptTable (buffer/prompts.py) over a store: per source, the training rows
    whose prompt under measurement `key` fits in `max_tokens`, held as a numpy array of row
    numbers; `item` reads (id, prompt text) with one indexed query. Built from the path in the
    process that serves the prompts (the buffer host): nothing of the dataset crosses Ray."""

    def __init__(self, path: str | Path, key: str, max_tokens: int):
        self.store = ProblemStore(path, cache=0)
        self.key = key
        self._rows: list[np.ndarray] = []
        self._fingerprints: list[int] = []
        if not self.store._query("SELECT 1 FROM measures WHERE key = ? AND done = 1", (key,)):
            raise ValueError(
                f"{path}: no complete prompt measurement {key}; the launcher measures the "
                "prompts before the buffer starts (data/store.py measure_store)"
            )
        for source in range(len(self.store.source_names())):
            rows = array("q")
            crc = 0
            sep = b""
            with self.store._lock:  # one streamed pass: the row numbers and the ids' checksum
                cursor = self.store._con.execute(
                    "SELECT p.row, p.id FROM problems p JOIN prompts m "
                    "ON m.key = ? AND m.row = p.row "
                    "WHERE p.source = ? AND p.split = 'train' AND m.tokens <= ? ORDER BY p.row",
                    (key, source, max_tokens),
                )
                while part := cursor.fetchmany(4096):
                    for row, pid in part:
                        rows.append(row)
                        crc = zlib.crc32(sep + pid.encode(), crc)
                        sep = b"\x00"
            self._rows.append(np.frombuffer(rows, np.int64).copy())
            self._fingerprints.append(crc)

    def source_names(self) -> list[str]:
        return self.store.source_names()

    def count(self, source: int) -> int:
        return len(self._rows[source])

    def item(self, source: int, index: int) -> tuple[str, str]:
        row = int(self._rows[source][index])
        ((pid, text),) = self.store._query(
            "SELECT p.id, m.text FROM problems p JOIN prompts m ON m.key = ? AND m.row = p.row "
            "WHERE p.row = ?",
            (self.key, row),
        )
        return pid, zlib.decompress(text).decode()

    def fingerprint(self, source: int) -> int:
        return self._fingerprints[source]

    def close(self) -> None:
        self.store.close()


@dataclass(frozen=True)
class StoreTableSpec:
    """What a process needs to open a `StorePromptTable` (a path, a key and a limit: small to
    pass as a Ray argument)."""

    path: str
    key: str
    max_tokens: int

    def open(self) -> StorePromptTable:
        return StorePromptTable(self.path, self.key, self.max_tokens)
