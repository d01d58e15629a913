"""The two-hop baseline of `microcoder bench buffer`: producer -> `zmq.proxy` -> consumer.

The buffer is a broker: every group crosses two sockets (into the server, out of it). The fair
bound for any brokered design is the same two hops with no broker logic at all: one process
running one `zmq.proxy` device per leg, carrying the bytes the buffer forwards,
    generator -> proxy -> executor   meta + text        (a judge reads text)
    executor  -> proxy -> learner    scores             (--per-get groups' scores per message)
    generator -> proxy -> learner    meta + tensors     (training reads token ids)
with every endpoint encoding and decoding its records with buffer/codec.py as the actors do
(the generator encodes each group, the executor decodes meta + text and encodes scores, the
learner decodes meta + tensors and the scores). Its rate is `proxy_codec_groups_per_s`;
`ratio_vs_proxy` = the buffer road's rate / it (goal >= 0.7).
"""

from __future__ import annotations

import threading
from dataclasses import replace

import zmq

from microcoder.bench.buffer import payload_table, road
from microcoder.bench.buffer.road import received, zmq_child

LEGS = ("to_executor", "scores", "to_learner")


def proxy_process(conn) -> None:
    """One process, one `zmq.proxy` thread per leg (PULL front, PUSH back, both bound on
    loopback); sends {leg: (front address, back address)} on `conn`, then serves until killed."""

    ctx = zmq.Context()
    addresses = {}
    pairs = []
    for leg in LEGS:
        front = ctx.socket(zmq.PULL)
        back = ctx.socket(zmq.PUSH)
        ports = [s.bind_to_random_port("tcp://127.0.0.1") for s in (front, back)]
        addresses[leg] = tuple(f"tcp://127.0.0.1:{p}" for p in ports)
        pairs.append((front, back))
    threads = [threading.Thread(target=zmq.proxy, args=p, daemon=True) for p in pairs]
    for t in threads:
        t.start()
    conn.send(addresses)
    for t in threads:
        t.join()


def proxy_generator(to_ex: str, to_lrn: str, group, n: int, wave: int, ready, go, cpu) -> None:
    """Encode each group (as actors/generator.py's put does) and PUSH one wave per message on
    each leg: meta + text to the executor's leg, meta + tensors to the learner's."""

    from microcoder.buffer.codec import group_frames

    groups = [replace(group, group_id=i) for i in range(n)]
    ends = (zmq.PUSH, to_ex, False), (zmq.PUSH, to_lrn, False)
    with zmq_child(ready, go, cpu, *ends) as (ex, lrn):
        for i in range(0, n, wave):
            encoded = [group_frames(g) for g in groups[i : i + wave]]
            ex.send_multipart([f for meta, text, _ in encoded for f in (meta, text)], copy=False)
            lrn.send_multipart(
                [f for meta, _, tensors in encoded for f in (meta, tensors)], copy=False
            )


def proxy_executor(from_gen: str, to_lrn: str, scores, n: int, per_get: int, ready, go, cpu):
    """PULL waves of meta + text, decode each group (as a judge reads it), PUSH the encoded
    scores of `per_get` groups per message."""

    from microcoder.buffer.codec import read_group, scores_frame

    ends = (zmq.PULL, from_gen, False), (zmq.PUSH, to_lrn, False)
    with zmq_child(ready, go, cpu, *ends) as (pull, push):
        for part in received(pull, n, 2, per_get):
            groups = [read_group(part[j], part[j + 1]) for j in range(0, len(part), 2)]
            push.send_multipart(
                [scores_frame(replace(scores, group_id=g.group_id)) for g in groups], copy=False
            )


def proxy_learner(groups_addr: str, scores_addr: str, n: int) -> int:
    """PULL from both learner legs until `n` groups (meta + tensors, decoded) and `n` scores
    (decoded) arrived."""

    from microcoder.buffer.codec import read_group, read_scores

    ctx = zmq.Context.instance()
    groups = ctx.socket(zmq.PULL)
    scores = ctx.socket(zmq.PULL)
    groups.connect(groups_addr)
    scores.connect(scores_addr)
    poller = zmq.Poller()
    for s in (groups, scores):
        poller.register(s, zmq.POLLIN)
    got = {groups: 0, scores: 0}
    while min(got.values()) < n:
        for sock, _ in poller.poll():
            frames = sock.recv_multipart(copy=False)
            if sock is groups:
                for j in range(0, len(frames), 2):
                    read_group(frames[j], None, frames[j + 1])
                got[sock] += len(frames) // 2
            else:
                for f in frames:
                    read_scores(f)
                got[sock] += len(frames)
    for s in (groups, scores):
        s.close(linger=0)
    return got[groups]


def proxy_road(mp, group, scores, n: int, wave: int, per_get: int) -> tuple[float, dict]:
    """(seconds, CPU seconds by role: generator, executor, learner, proxy) of `n` groups over the
    two-hop road; `group` and `scores` are templates (a Group and its GroupScores)."""

    parent, child = mp.Pipe()
    proxy = mp.Process(target=proxy_process, args=(child,), daemon=True)
    proxy.start()
    legs = parent.recv()
    try:
        return road.timed_road(
            mp,
            [
                (proxy_executor, (legs["to_executor"][1], legs["scores"][0], scores, n, per_get)),
                (proxy_generator, (legs["to_executor"][0], legs["to_learner"][0], group, n, wave)),
            ],
            lambda: proxy_learner(legs["to_learner"][1], legs["scores"][1], n),
            others={"proxy": proxy.pid},
        )
    finally:
        proxy.terminate()
        proxy.join(10)


def proxy_table(result: dict) -> str:
    """The buffer road beside the two-hop proxy road, per payload."""

    columns = [
        ("buffer/s", "groups_per_s", ">9.0f"),
        ("proxy+codec/s", "proxy_codec_groups_per_s", ">13.0f"),
        ("vs proxy", "ratio_vs_proxy", ">8.2f"),
        ("cpu ms", "cpu_ms_per_group", ">6.3f"),
        ("proxy cpu ms", "proxy_codec_cpu_ms_per_group", ">12.3f"),
    ]
    lines = payload_table(result["payloads"], columns)
    for name, r in result["payloads"].items():
        if "server_split_ms_per_group" in r:
            x = r["server_split_ms_per_group"]
            total = x["total"] or 1.0
            lines.append(
                f"{name} server loop (cProfile, share of its CPU): "
                + ", ".join(
                    f"{k} {x[k] / total:.0%}" for k in ("recv", "decode", "state", "send", "other")
                )
                + f" of {x['total']:.3f} ms/group profiled"
            )
    lines.append(
        "(proxy+codec: generator -> zmq.proxy -> executor / learner, same endpoint encode and "
        "decode as the actors, no broker logic: the bound for any brokered design; goal "
        "vs proxy >= 0.7)"
    )
    return "\n".join(lines)
