"""W&B for real, offline: the run's MetricsLogger with the real WandbSink under WANDB_MODE=offline
(no network, no login), then the run file W&B wrote is read back and its history checked.

The real `wandb` package is needed (the `dev` extra pins it): without it this test FAILS with the
install command (WandbSink's require_wandb), it is never skipped.

The `.wandb` file is W&B's record log: a 7-byte header (":W&B", magic 0xBEE1 little-endian, version
0), then 32 KiB blocks of chunks (CRC32C 4 bytes, length 2 bytes little-endian, type 1 byte:
1 full, 2 first, 3 middle, 4 last; a block's tail shorter than a chunk header is padding), each
whole record a protobuf `Record` of wandb.proto.wandb_internal_pb2. The reader below is ours, from
that layout (wandb ships no Python reader since the Go core replaced the Python one).
"""

from __future__ import annotations

import json
from pathlib import Path

from microcoder.launch.monitor.metrics_export import WandbSink
from microcoder.launch.monitor.metrics_log import MetricsLogger

HEADER = b":W&B\xe1\xbe\x00"
BLOCK = 32 * 1024
CHUNK_HEAD = 7


def wandb_records(path: Path) -> list[bytes]:
    """The whole records (protobuf bytes) of a `.wandb` file, in order."""
    data = path.read_bytes()
    assert data[: len(HEADER)] == HEADER, f"{path} is not a W&B record log"
    pos, records, partial = len(HEADER), [], b""
    while pos + CHUNK_HEAD <= len(data):
        room = BLOCK - pos % BLOCK
        if room < CHUNK_HEAD:  # padding at a block's end
            pos += room
            continue
        length = int.from_bytes(data[pos + 4 : pos + 6], "little")
        kind = data[pos + 6]
        body = data[pos + CHUNK_HEAD : pos + CHUNK_HEAD + length]
        pos += CHUNK_HEAD + length
        if kind == 0 and length == 0:  # zero fill at the end of a flushed block
            continue
        partial = body if kind in (1, 2) else partial + body
        if kind in (1, 4):
            records.append(partial)
            partial = b""
    return records


def history(path: Path) -> dict[int, dict[str, object]]:
    """{step: {key: value}} of the `history` records of a run file."""
    from wandb.proto import wandb_internal_pb2 as pb

    out: dict[int, dict[str, object]] = {}
    for raw in wandb_records(path):
        rec = pb.Record()
        rec.ParseFromString(raw)
        if rec.WhichOneof("record_type") != "history":
            continue
        row = {
            (it.key or "/".join(it.nested_key)): json.loads(it.value_json)
            for it in rec.history.item
        }
        out[int(rec.history.step.num)] = row
    return out


def test_wandb_offline_run_file_holds_the_logged_steps_and_eval(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb-home"))
    monkeypatch.setenv("WANDB_SILENT", "true")
    run_dir = tmp_path / "run"
    logger = MetricsLogger(run_dir)
    sink = WandbSink("microcoder-test", run_dir, {"max_steps": 2})
    logger.sinks.append(sink)
    for step, ac in ((1, 3), (2, 5)):
        logger.log(
            "step",
            step=step,
            policy_version=step,
            loss=0.5 / step,
            verdict_counts={"AC": ac, "WA": 8 - ac},
            group_pass_hist=[1, 0, 0, 1, 0, 0],
        )
    logger.log("event", event="x", step=2)  # not a scalar record: not logged
    logger.log("eval", step=2, policy_version=2, heldout_pass_rate=0.375)
    sink.close()
    logger.close()

    run_id = json.loads((run_dir / "wandb.json").read_text())["id"]
    files = list((run_dir / "wandb").glob(f"offline-run-*-{run_id}/run-{run_id}.wandb"))
    assert len(files) == 1, f"no offline run file for {run_id}: {list(run_dir.rglob('*'))}"
    rows = history(files[0])
    assert sorted(rows) == [1, 2], f"history steps {sorted(rows)} in {files[0]}: {rows}"
    assert rows[1]["loss"] == 0.5 and rows[2]["loss"] == 0.25
    assert (rows[1]["verdict_counts/AC"], rows[1]["verdict_counts/WA"]) == (3, 5)
    assert rows[2]["verdict_counts/AC"] == 5
    assert rows[1]["group_pass_hist/0%"] == 1 and rows[1]["group_pass_hist/100%"] == 0
    assert rows[2]["eval/heldout_pass_rate"] == 0.375
    assert rows[2]["eval/policy_version"] == 2
