"""The `http` judge at scale (issue 45 item 5), against real judge services on loopback (the
real sandbox pool): a list of URLs spreads problems over the servers; a server down at start or
after it leaves the work to the others, and SE names every server when all are down; a
problem's tests go to a server once (5 MiB of tests, a group of 8 programs: under 6 MB on the
wire, counted by a TCP proxy between client and server; a second group sends only programs);
a restarted server (cache lost) gets the problem again and the verdicts stay right."""

from __future__ import annotations

import socket
import threading

import pytest

from microcoder.bench.judge_http import CountingProxy, big_problem, programs, protocol1_bytes
from microcoder.data.problem import validate_problem
from microcoder.sandbox import ExecutorConfig
from microcoder.sandbox.remote import client
from microcoder.sandbox.remote.client import HttpJudgePool, JudgeServerUnavailable
from microcoder.sandbox.remote.server import ProblemCache, make_server


def serve(cfg: ExecutorConfig, port: int = 0):
    server = make_server(cfg, "127.0.0.1", port)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def stop(server) -> None:
    server.shutdown()
    server.close()


@pytest.fixture
def two():
    servers = [serve(ExecutorConfig(workers=1)), serve(ExecutorConfig(workers=1))]
    yield servers
    for s in servers:
        if s.socket.fileno() != -1:
            stop(s)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def echo(k: int):
    """A stdin problem whose answer is k (so a wrong problem on the server would show)."""
    return validate_problem(
        {"id": f"p{k}", "kind": "stdin", "tests": [{"input": f"{k}\n", "output": f"{k}\n"}]}
    )


RIGHT = "print(input())\n"
WRONG = "print(-1)\n"


def judge_all(pool, problems, codes=(RIGHT, WRONG)):
    """Every code on every problem; {(problem id, code index): verdict}."""
    for p in problems:
        for i, c in enumerate(codes):
            pool.submit(p, c, tag=(p.id, i))
    return {v.tag: v for v in pool.as_completed()}


def assert_right(got, problems, codes=(RIGHT, WRONG)):
    want = {
        (p.id, i): ("AC" if c == RIGHT else "WA") for p in problems for i, c in enumerate(codes)
    }
    assert {k: v.verdict for k, v in got.items()} == want


def test_a_list_of_urls_spreads_problems_over_both_servers(two):
    problems = [echo(k) for k in range(8)]
    with HttpJudgePool(judge_url=[s.url for s in two]) as pool:
        assert pool.size == 2  # both servers' workers
        got = judge_all(pool, problems)
        stats = pool.stats()
    assert_right(got, problems)
    assert all(s.judged > 0 for s in two), [s.judged for s in two]
    assert sum(s.judged for s in two) == 16
    # each problem went to one server, once: its programs followed it
    assert sum(s.problems.uploads for s in two) == 8
    assert [st["judged"] for st in stats] == [s.judged for s in two]


def test_one_server_down_at_start_leaves_the_work_to_the_other(two, capsys):
    dead = f"http://127.0.0.1:{free_port()}"
    live = two[0]
    problems = [echo(k) for k in range(4)]
    with HttpJudgePool(judge_url=[dead, live.url]) as pool:
        assert pool.size == 1
        got = judge_all(pool, problems)
    assert_right(got, problems)
    assert live.judged == 8
    err = capsys.readouterr().err
    assert "WARNING" in err and dead in err and "judging on the others" in err


def test_a_server_that_hangs_at_start_is_passed_over_at_the_deadline(two, capsys):
    with socket.create_server(("127.0.0.1", 0)) as hole:  # accepts, never answers
        url = f"http://127.0.0.1:{hole.getsockname()[1]}"
        with HttpJudgePool(judge_url=[url, two[1].url], http_timeout_s=1) as pool:
            got = judge_all(pool, [echo(1)])
    assert_right(got, [echo(1)])
    assert two[1].judged == 2
    assert url in capsys.readouterr().err


def test_a_server_that_goes_down_after_start_leaves_the_work_to_the_other(two):
    problems = [echo(k) for k in range(6)]
    with HttpJudgePool(judge_url=[s.url for s in two], http_timeout_s=10) as pool:
        assert_right(judge_all(pool, problems), problems)
        before = two[1].judged
        assert two[0].judged > 0 and before > 0
        stop(two[0])  # its problems must move to the other server
        got = judge_all(pool, problems)
        down = pool.stats()[0]
    assert_right(got, problems)
    assert two[1].judged == before + 12
    assert down["down"] is True


class Hole:
    """A listener on `port` that accepts connections and never answers (a hung server)."""

    def __init__(self, port: int):
        self.sock = socket.create_server(("127.0.0.1", port))
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                self.conns.append(self.sock.accept()[0])
            except OSError:
                return

    def close(self) -> None:
        self.sock.close()
        for c in self.conns:
            c.close()


def test_a_server_that_hangs_after_start_is_waited_on_once_per_thread(two):
    """The programs already queued for a server that then failed go elsewhere at once instead
    of each waiting out its own deadline there."""
    problem = echo(5)
    with HttpJudgePool(judge_url=[s.url for s in two], http_timeout_s=1) as pool:
        assert pool.size == 2
        port = two[0].server_address[1]
        stop(two[0])
        hole = Hole(port)  # the first server now hangs; `problem` is first routed to it
        try:
            got = judge_all(pool, [problem], codes=[RIGHT] * 6)
        finally:
            hole.close()
    assert {v.verdict for v in got.values()} == {"AC"} and len(got) == 6
    assert two[1].judged == 6
    assert len(hole.conns) <= pool.size, len(hole.conns)


def test_every_server_down_is_se_naming_each(two):
    problems = [echo(1)]
    with HttpJudgePool(judge_url=[s.url for s in two], http_timeout_s=5) as pool:
        for s in two:
            stop(s)
        got = judge_all(pool, problems, codes=(RIGHT,))
    (v,) = got.values()
    assert v.verdict == "SE" and v.reward is None
    assert "every judge server failed" in v.message
    assert all(s.url in v.message for s in two)
    with pytest.raises(JudgeServerUnavailable, match="no answer"):
        HttpJudgePool(judge_url=[s.url for s in two])  # none answering at start: an error


def test_a_big_problems_tests_go_to_the_server_once():
    """5 MiB of tests, a group of 8 programs: under 6 MB crosses the socket (protocol 1 sent
    the tests with each program: 8 x 5 MiB); a second group of the problem sends only the
    programs."""
    server = serve(ExecutorConfig(workers=2))
    proxy = CountingProxy(server.server_address[:2])
    problem = big_problem(5.0)
    codes = programs(8)
    want = {i: "AC" if i % 2 == 0 else "WA" for i in range(8)}
    try:
        with HttpJudgePool(judge_url=proxy.url) as pool:
            proxy.take()  # the health check
            for group in (1, 2):
                for i, c in enumerate(codes):
                    pool.submit(problem, c, tag=i)
                assert {v.tag: v.verdict for v in pool.as_completed()} == want
                sent = proxy.take()
                if group == 1:
                    assert 5 * 2**20 < sent < 6_000_000, sent
                else:  # only the 8 programs and their requests' headers
                    assert sent < 8 * 1024, sent
    finally:
        proxy.close()
        stop(server)
    assert server.problems.uploads == 1
    assert protocol1_bytes(problem, codes) > 8 * 5 * 2**20


def test_a_restarted_server_gets_the_problem_again_and_judges_right():
    server = serve(ExecutorConfig(workers=1))
    port = server.server_address[1]
    problems = [echo(3), echo(4)]
    with HttpJudgePool(judge_url=server.url) as pool:
        assert_right(judge_all(pool, problems), problems)
        stop(server)  # its cache is lost with it
        again = serve(ExecutorConfig(workers=1), port)
        try:
            got = judge_all(pool, problems)
            assert_right(got, problems)
            assert again.problems.uploads == 2  # each problem once more, after a 409
            assert pool.stats()[0]["reuploads"] == 2
        finally:
            stop(again)


def test_an_evicted_problem_is_uploaded_again():
    server = serve(ExecutorConfig(workers=1, judge_cache_mb=1))
    big = [big_problem(0.7, tests=2, pid=f"big{k}") for k in range(2)]
    codes = programs(2)
    try:
        with HttpJudgePool(judge_url=server.url) as pool:
            for round_ in range(2):
                for p in big:
                    for i, c in enumerate(codes):
                        pool.submit(p, c, tag=(p.id, i))
                    got = {v.tag: v.verdict for v in pool.as_completed()}
                    assert got == {(p.id, 0): "AC", (p.id, 1): "WA"}, (round_, got)
        assert server.problems.evictions >= 3 and server.problems.uploads == 4
    finally:
        stop(server)


def test_the_problem_cache_drops_the_least_recently_used_by_bytes():
    cache = ProblemCache(100)
    a, b, c = echo(1), echo(2), echo(3)
    cache.put("a", a, 40)
    cache.put("b", b, 40)
    assert cache.get("a") is a  # now b is the least recently used
    cache.put("c", c, 40)
    assert cache.get("b") is None and cache.get("a") is a and cache.get("c") is c
    assert cache.bytes == 80 and cache.evictions == 1
    cache.put("huge", a, 500)  # larger than the bound: kept alone
    assert len(cache) == 1 and cache.get("huge") is a and cache.bytes == 500


def test_a_server_of_another_protocol_is_an_error_saying_what_to_do(two, monkeypatch):
    monkeypatch.setattr(client, "PROTOCOL", 3)
    with pytest.raises(JudgeServerUnavailable, match="speaks protocol 2, this client 3.*same"):
        HttpJudgePool(judge_url=two[0].url)


def test_judge_url_takes_one_url_or_a_list():
    assert ExecutorConfig(judge_url="http://a:1").judge_url == ["http://a:1"]
    assert ExecutorConfig(judge_url=["http://a:1", "http://b:2"]).judge_url == [
        "http://a:1",
        "http://b:2",
    ]
    assert ExecutorConfig().judge_url == [] and ExecutorConfig(judge_url="").judge_url == []
