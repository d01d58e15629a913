"""Hostile programs: never AC, the host is untouched, the pool keeps judging correctly.

Each program is written so that it WOULD get AC if the protection were missing (it prints what
it managed to do, and the expected output says it succeeded), so every test can fail.
"""

from __future__ import annotations

import os

from microcoder.data.problem import validate_problem

from .conftest import loopback_listener

SECRET_ENV, SECRET_VALUE = "MICROCODER_TEST_SECRET", "env-s3cr3t-7f1c"  # set by conftest's pool


def expect(output: str, time_limit: float = 1.0):
    return validate_problem(
        {
            "id": "hostile",
            "kind": "stdin",
            "time_limit_s": time_limit,
            "tests": [{"input": "", "output": output}],
        }
    )


def test_fork_bomb_is_bounded(pool, healthy):
    code = (
        "import os, time\nn = 0\n"
        "for _ in range(200):\n"
        "    try:\n        pid = os.fork()\n    except OSError:\n        break\n"
        "    if pid == 0:\n        time.sleep(5); os._exit(0)\n"
        "    n += 1\nprint(n)\n"
    )
    v = pool.judge(expect("200"), code)
    assert v.verdict != "AC" and v.stdout.strip() != "200"
    healthy(pool)


def test_memory_bomb_is_mle(pool, healthy):
    v = pool.judge(expect("ok"), "x = bytearray(3 << 30)\nprint('ok')")
    assert v.verdict == "MLE"
    healthy(pool)


def test_infinite_loop_is_tle(pool, healthy):
    assert pool.judge(expect("done", 0.5), "while True:\n    pass").verdict == "TLE"
    healthy(pool)


def test_ignored_sigterm_still_stops(pool, healthy):
    code = "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True:\n    pass"
    assert pool.judge(expect("done", 0.5), code).verdict == "TLE"
    healthy(pool)


def test_sleeping_program_is_stopped_by_the_wall_clock(pool, healthy):
    assert (
        pool.judge(expect("done", 0.3), "import time\ntime.sleep(60)\nprint('done')").verdict
        == "TLE"
    )
    healthy(pool)


def test_disk_fill_is_bounded(pool, healthy, tmp_path):
    code = (
        "import os\nwritten = 0\n"
        "for i in range(400):\n"
        "    with open(f'/tmp/fill{i}', 'wb') as f:\n        f.write(b'x' * (1 << 20))\n"
        "    written += 1\nprint(written)\n"
    )
    v = pool.judge(expect("400", 5.0), code)
    assert v.verdict != "AC"
    assert not any(name.startswith("fill") for name in os.listdir("/tmp"))
    healthy(pool)


def test_output_flood_is_cut(pool, healthy):
    code = "import sys\nfor _ in range(1024):\n    sys.stdout.write('x' * (1 << 20))\nprint('done')"
    v = pool.judge(expect("x" * 100, 10.0), code)
    assert v.verdict == "OLE" and "output limit" in v.message
    healthy(pool)


def test_secret_file_outside_the_sandbox_is_invisible(pool, healthy, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("file-s3cr3t")
    problem_file = os.path.abspath(__file__)
    code = f"print(open({str(secret)!r}).read())\nprint(len(open({problem_file!r}).read()) > 0)"
    assert pool.judge(expect("file-s3cr3t\nTrue"), code).verdict != "AC"
    assert secret.read_text() == "file-s3cr3t"
    healthy(pool)


def test_judge_environment_is_invisible(pool, healthy):
    assert os.environ[SECRET_ENV] == SECRET_VALUE
    code = (
        f"import os\nv = os.environ.get({SECRET_ENV!r}, '')\n"
        "for pid in os.listdir('/proc'):\n"
        "    try:\n        v = v or (open(f'/proc/{pid}/environ', 'rb').read().decode(errors='ignore')"
        f"\n              if {SECRET_VALUE!r} in open(f'/proc/{{pid}}/environ', 'rb').read().decode(errors='ignore') else '')\n"
        "    except OSError:\n        pass\n"
        f"print({SECRET_VALUE!r} if {SECRET_VALUE!r} in v else 'no')\n"
    )
    v = pool.judge(expect(SECRET_VALUE), code)
    assert v.verdict != "AC" and SECRET_VALUE not in v.stdout
    healthy(pool)


def test_network_to_host_loopback_is_unreachable(pool, healthy):
    with loopback_listener() as (port, got):
        code = (
            f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=1)\n"
            "s.sendall(b'pwned')\nprint('connected')"
        )
        v = pool.judge(expect("connected"), code)
    assert v.verdict != "AC" and got == []
    healthy(pool)


def test_killing_the_parent_fails(pool, healthy):
    before, restarts = pool.worker_pids(), pool.restarts
    code = (
        "import os, signal\nok = 0\n"
        "for pid in (os.getppid(), 1):\n"
        "    try:\n        os.kill(pid, signal.SIGKILL); ok += 1\n    except OSError:\n        pass\n"
        "print(ok)"
    )
    v = pool.judge(expect("2"), code)
    assert v.verdict not in ("AC", "SE")
    assert pool.restarts == restarts and pool.worker_pids() == before
    healthy(pool)


def _processes_named(marker: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


def test_daemon_does_not_outlive_its_test(pool, healthy, sandbox_processes):
    marker = "31.4159"  # the daemon becomes `sleep 31.4159`, findable in the host's /proc
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execv('/usr/bin/sleep', ['sleep', {marker!r}])\n"
        "    os._exit(0)\n"
        "time.sleep(0.2)\nprint('spawned')"
    )
    assert pool.judge(expect("spawned"), code).verdict == "AC"  # harmless otherwise
    assert _processes_named(marker) == [] and sandbox_processes(pool) == set()
    healthy(pool)


def test_closing_its_own_stdout(pool, healthy):
    code = "import os, sys\nprint('partial')\nsys.stdout.flush()\nos.close(1)\nprint('more')"
    assert pool.judge(expect("partial\nmore"), code).verdict != "AC"
    healthy(pool)
