"""The fork server: a warm interpreter inside the sandbox that forks one child per program run.

Stdlib only; started by sandbox/worker.py as `python -I -S -B -c <bootstrap>` with this folder on
sys.path, inside bubblewrap (or bare with isolation "none"). It never sees expected outputs: the
host sends one request per solution (the program and its inputs or test calls) and gets raw
outputs back (frames.py); for stdin problems with early exit it waits for the host's `next` or
`stop` after each run. Inside bubblewrap it is PID 1 of its own PID namespace, so a program
cannot kill it, and after every run it kills every process left in the namespace (daemons
included). It is non-dumpable (no ptrace, no /proc/1/mem).

Cheap runs: what a run would otherwise build is built once here and inherited pristine by every
fork (the stdio fds and objects, the compiled program, the rlimits, the working directory), and
the server stays small (no shutil, no .pth imports): a fork copies its page tables, and every
page a child or the server writes afterwards is a copy-on-write fault.
"""

from __future__ import annotations

import gc
import os
import select
import signal
import sys
import time
import traceback

import childproc
from frames import (
    NEXT,
    STOP,
    FrameError,
    done_frame,
    read_control,
    read_frame,
    write_all,
    write_frame,
)
from serverenv import not_dumpable, proc_cpu, remove_tree, site_paths


class Server:
    """State of one fork server: control pipes, reusable memfds, the loaded program."""

    def __init__(self, ctl_in: int, ctl_out: int, uid: int, workdir: str):
        self.ctl_in = ctl_in
        self.ctl_out = ctl_out
        self.uid = uid
        self.workdir = workdir
        self.is_init = os.getpid() == 1
        # Inside the sandbox the whole private /tmp is the programs' (workdir is /tmp/w).
        self.scratch = os.path.dirname(workdir) if self.is_init else None
        self.fds = [os.memfd_create(name) for name in ("stdin", "stdout", "stderr")]
        # fds 0/1/2 of the server ARE the program's stdio (read-only / write-only descriptions
        # of the memfds, offsets rewound before each run), so a child needs no open/dup2.
        modes = (os.O_RDONLY, os.O_WRONLY, os.O_WRONLY)
        for target, (fd, mode) in enumerate(zip(self.fds, modes, strict=True)):
            view = os.open(f"/proc/self/fd/{fd}", mode)
            os.dup2(view, target)
            os.close(view)
        childproc.prepare_stdio()
        self.workdir_id: tuple | None = None
        self.program = None
        self.runner = None  # (what a forked child runs, its argument): see load
        self.stopping = False
        self.pending: tuple[dict, bytes] | None = None
        self.result_left = 0  # bytes the running program may still return (functional/assert)
        self.prof: dict | None = None  # dev-only stage stamps of the current run (see profile)

    # -- requests ---------------------------------------------------------------------------
    def serve(self) -> None:
        write_frame(self.ctl_out, {"op": "ready", "pid": os.getpid(), "init": self.is_init})
        while True:
            try:
                header, payload = self.pending or read_frame(self.ctl_in)
            except FrameError:
                return
            self.pending = None
            op = header["op"]
            self.profile(header)
            if op == "stdin":
                if self.load(header):
                    self.run_stdin(header, payload)
            elif op == "tests":
                if self.load(header):
                    self.run_tests(header)
            elif op == "ping":
                write_frame(self.ctl_out, {"op": "pong"})
            elif op == "exit":
                return
            # "stop"/"next" while idle: the run they meant has already finished; ignore them.

    def load(self, h: dict) -> bool:
        """Fresh working directory, compile the program; on a syntax error reply `ce`."""
        self.reset_workdir()
        self.program = None
        if h.get("run"):  # C++ / Java (sandbox/languages.py): compile here, exec per test
            error = self.compile(h)
            if error is not None:
                write_frame(self.ctl_out, {"op": "ce", "msg": error[-2000:]})
                return False
            self.program = (h["kind"], None, None, "")
            self.runner = (childproc.exec_program, h["run"])
            self.rlimits = childproc.rlimits(h["limits"])
            return True
        try:  # dont_inherit: not this module's `from __future__ import annotations` (PEP 563)
            prelude = None
            if h.get("prelude"):
                prelude = compile(h["prelude"], "prelude.py", "exec", dont_inherit=True)
            code = compile(h["code"], "solution.py", "exec", dont_inherit=True)
        except (SyntaxError, ValueError, MemoryError, RecursionError, OverflowError) as exc:
            msg = "".join(traceback.format_exception_only(type(exc), exc))[-2000:]
            write_frame(self.ctl_out, {"op": "ce", "msg": msg})
            return False
        self.program = (h["kind"], code, prelude, h.get("fn_name") or "")
        self.runner = (childproc.run_program, code)
        self.rlimits = childproc.rlimits(h["limits"])
        gc.freeze()  # children then never touch these objects' GC headers (fewer COW faults)
        if self.prof is not None:
            self.prof["loaded"] = time.monotonic()
        return True

    def compile(self, h: dict) -> str | None:
        """Write the source into the fresh working directory and run the compiler there, as
        the programs' uid under the compile limits; None when it succeeded, else its messages."""
        with open(h["source"], "w", encoding="utf-8", errors="surrogatepass") as f:
            f.write(h["code"])
        limits = h["compile_limits"]
        pid, _ = self._spawn(
            childproc.rlimits(limits), b"", -1, childproc.exec_program, h["compile"]
        )
        reason = self._wait(pid, limits)
        _, status, _ = os.wait4(pid, 0)
        self._sweep(pid)
        code = os.waitstatus_to_exitcode(status)
        if reason is None and code == 0:
            return None
        _, fout, ferr = self.fds
        text = b""
        for fd in (fout, ferr):
            size = os.fstat(fd).st_size
            text += os.pread(fd, min(size, 4000), max(0, size - 4000))
        text = text.decode("utf-8", "replace").strip()
        if reason == "tle" or code == -signal.SIGXCPU:
            return f"compilation exceeded its time limit ({limits['time_s']:g} s CPU)\n{text}"
        if code < 0:
            return f"the compiler was killed by signal {-code} (memory or output limit)\n{text}"
        return text or f"the compiler exited with status {code}"

    def profile(self, header: dict) -> None:
        """Dev-only (`microcoder bench judge --profile`): when a request asks for it, stamp the
        stages of each run (CLOCK_MONOTONIC, which the host shares) into its `done` frame."""
        if not header.get("profile"):
            self.prof = None
            return
        if childproc.STAMPS is None:
            import mmap

            childproc.STAMPS = memoryview(mmap.mmap(-1, 16)).cast("d")
        self.prof = {"got": time.monotonic()}

    def reset_workdir(self) -> None:
        """Empty the programs' writable space, unless the last solution left it untouched."""
        if self.workdir_id is not None and self._workdir_clean():
            return
        if self.scratch:
            for name in os.listdir(self.scratch):
                remove_tree(os.path.join(self.scratch, name))
        else:
            remove_tree(self.workdir)
        os.makedirs(self.workdir, mode=0o755)
        if self.uid:
            os.chown(self.workdir, self.uid, self.uid)
        os.chdir(self.workdir)  # children inherit it as their working directory
        st = os.stat(self.workdir)
        self.workdir_id = (st.st_ino, st.st_mode, st.st_uid, st.st_gid)

    def _workdir_clean(self) -> bool:
        try:
            st = os.stat(self.workdir)
            if (st.st_ino, st.st_mode, st.st_uid, st.st_gid) != self.workdir_id:
                return False
            if os.listdir(self.workdir):
                return False
            return not self.scratch or os.listdir(self.scratch) == [os.path.basename(self.workdir)]
        except OSError:
            return False

    def run_stdin(self, h: dict, data: bytes) -> None:
        """Run the program once per input, one `done` per run. In lockstep mode (early exit)
        the server waits after each run for the host's `next` (it compared: passed) or `stop`,
        so no run starts that the verdict does not need."""
        target, arg = self.runner
        sizes = h["sizes"]
        lockstep = h.get("lockstep", False)
        limits = h["limits"]
        caps = h.get("out_caps") or [limits["output_bytes"]] * len(sizes)
        start = 0
        for i, size in enumerate(sizes):
            if i and lockstep:
                got = read_control(self.ctl_in)  # one read, no json, no dict (frames.NEXT)
                if got == STOP:
                    return
                if got != NEXT:  # not the usual bytes: read the whole frame
                    frame = read_frame(self.ctl_in, got)
                    op = frame[0]["op"]
                    if op != "next":
                        if op != "stop":
                            self.pending = frame  # a new request: the host gave up on this one
                        return
                if self.prof is not None:
                    self.prof = {"got": time.monotonic()}
            rlimits = childproc.with_output_cap(self.rlimits, caps[i])
            pid, t0 = self._spawn(rlimits, data[start : start + size], -1, target, arg)
            start += size
            reason = self._wait(pid, limits)
            self._finish(pid, t0, reason, caps[i], with_stdout=True, index=i)

    def run_tests(self, h: dict) -> None:
        kind, code, prelude, fn_name = self.program
        r, w = os.pipe()
        tests = h["tests"]
        early = h.get("early_exit", True)
        args = (kind, code, prelude, fn_name, tests, early)
        self.stopping = False
        self.result_left = h["limits"]["result_bytes"]
        pid, t0 = self._spawn(self.rlimits, b"", w, childproc.run_tests, *args)
        os.close(w)
        try:
            reason, _ = self._watch(pid, h["limits"], r)
        finally:
            os.close(r)
        self._finish(pid, t0, reason, h["limits"]["output_bytes"], with_stdout=False)

    # -- children ---------------------------------------------------------------------------
    def _spawn(self, rlimits, data: bytes, result_w: int, target, *args) -> tuple[int, float]:
        fin, fout, ferr = self.fds
        ftruncate = os.ftruncate
        ftruncate(fout, 0)
        ftruncate(ferr, 0)
        ftruncate(fin, 0)
        if data:
            os.pwrite(fin, data, 0)
        lseek = os.lseek
        lseek(0, 0, os.SEEK_SET)  # the stdio offsets the last run moved
        lseek(1, 0, os.SEEK_SET)
        lseek(2, 0, os.SEEK_SET)
        uid = self.uid
        t0 = time.monotonic()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            try:
                childproc.enter(rlimits, uid, result_w)
                target(*args)
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(70)
        if self.prof is not None:
            self.prof.update(fork=t0, forked=time.monotonic())
        return pid, t0

    def _wait(self, pid: int, limits: dict) -> str | None:
        """Wait for a stdin run (nothing else can arrive meanwhile); kill it on TLE."""
        cpu_limit = limits["time_s"]
        wall_limit = limits["wall_s"]
        pidfd = os.pidfd_open(pid)
        try:
            t0 = time.monotonic()
            wait = min(cpu_limit, wall_limit)
            while not select.select([pidfd], [], [], wait)[0]:
                elapsed = time.monotonic() - t0
                if elapsed > wall_limit or proc_cpu(pid) > cpu_limit:
                    os.kill(pid, signal.SIGKILL)
                    return "tle"
                wait = max(0.0, min(0.05, wall_limit - elapsed)) + 0.001
            return None
        finally:
            os.close(pidfd)

    def _watch(self, pid: int, limits: dict, result_r: int | None) -> tuple[str | None, int]:
        """Wait for the child, streaming its result lines; kill it on TLE or a host `stop`."""
        cpu_limit = limits["time_s"]
        wall_limit = limits["wall_s"]
        pidfd = os.pidfd_open(pid)
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        poller.register(self.ctl_in, select.POLLIN)
        if result_r is not None:
            os.set_blocking(result_r, False)
            poller.register(result_r, select.POLLIN)
        t_last = time.monotonic()
        cpu_base = 0.0
        pending = b""
        lines = 0
        reason = None
        try:
            while True:
                elapsed = time.monotonic() - t_last
                wait = cpu_limit - elapsed if elapsed < cpu_limit else 0.05
                events = poller.poll(max(0.0, min(wait, wall_limit - elapsed)) * 1000 + 1)
                done = False
                for fd, _ in events:
                    if fd == pidfd:
                        done = True
                    elif fd == result_r:
                        pending, n, cpu = self._forward(result_r, pending)
                        if n:
                            lines = lines + n
                            cpu_base = cpu_base + cpu
                            t_last = time.monotonic()
                        if self.result_left < 0 and reason is None:
                            os.kill(pid, signal.SIGKILL)  # returned values over their cap
                            reason = "ole"
                    elif fd == self.ctl_in:
                        header, _ = read_frame(self.ctl_in)
                        if header["op"] == "stop":
                            os.kill(pid, signal.SIGKILL)
                            reason = reason or "stopped"
                            self.stopping = True
                if done:
                    if result_r is not None:
                        self._forward(result_r, pending)
                        if self.result_left < 0 and reason is None:
                            reason = "ole"
                    return reason, lines
                elapsed = time.monotonic() - t_last
                if reason is None and (
                    elapsed > wall_limit or proc_cpu(pid) - cpu_base > cpu_limit
                ):
                    os.kill(pid, signal.SIGKILL)
                    reason = "tle"
        finally:
            os.close(pidfd)

    def _forward(self, fd: int, pending: bytes) -> tuple[bytes, int, float]:
        """Relay complete result lines to the host; return the incomplete rest, count, cpu.
        Reads no more than `result_left` bytes per run (then it goes negative: OLE)."""
        chunks = [pending]
        while self.result_left >= 0:
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                break
            if not chunk:
                break
            chunks.append(chunk)
            self.result_left -= len(chunk)
        data = b"".join(chunks)
        if self.result_left < 0:  # over the cap: only the bytes within it count
            data = data[: len(data) + self.result_left]
        cut = data.rfind(b"\n") + 1
        if not cut:
            return data, 0, 0.0
        complete = data[:cut]
        cpu = 0.0
        for line in complete.splitlines():
            try:
                cpu += float(line.split(b"\t", 3)[2])
            except (IndexError, ValueError):
                pass
        write_frame(self.ctl_out, {"op": "results"}, complete)
        return data[cut:], complete.count(b"\n"), cpu

    def _finish(self, pid: int, t0: float, reason, cap: int, with_stdout: bool, index=-1):
        prof = self.prof
        noticed = time.monotonic() if prof is not None else 0.0
        _, status, usage = os.wait4(pid, 0)
        wall = time.monotonic() - t0
        self._sweep(pid)
        reaped = time.monotonic() if prof is not None else 0.0
        _, fout, ferr = self.fds
        out_bytes = os.lseek(fout, 0, os.SEEK_END)  # the size (these fds' offsets are unused)
        err_bytes = os.lseek(ferr, 0, os.SEEK_END)
        # read only what is there (a pread of the whole cap would map and unmap 1 MiB per run),
        # and nothing of an output over its cap (OLE: the host needs only its head)
        keep = out_bytes if 0 < out_bytes <= cap and with_stdout else 0
        stdout = os.pread(fout, keep, 0) if keep else b""
        err_tail = b""
        if err_bytes:
            err_tail = os.pread(ferr, min(err_bytes, 2000), max(0, err_bytes - 2000))
        exit_code = os.waitstatus_to_exitcode(status)
        cpu = usage.ru_utime + usage.ru_stime
        err_text = err_tail.decode("utf-8", "replace")
        head = stdout[:300] if keep else os.pread(fout, 300, 0)
        out_head = head.decode("utf-8", "replace")
        if prof is None:  # the usual case: no json here (frames.done_frame)
            frame = done_frame(
                index,
                exit_code,
                cpu,
                wall,
                usage.ru_maxrss,
                reason,
                out_bytes,
                err_bytes,
                err_text,
                out_head,
                stdout,
            )
            write_all(self.ctl_out, frame)
            return
        header = {
            "op": "done",
            "i": index,
            "exit": exit_code,
            "cpu": cpu,
            "wall": wall,
            "maxrss_kb": usage.ru_maxrss,
            "reason": reason,
            "out_bytes": out_bytes,
            "err_bytes": err_bytes,
            "err_tail": err_text,
            "out_head": out_head,
        }
        child = list(childproc.STAMPS)
        childproc.STAMPS[0] = childproc.STAMPS[1] = 0.0
        self.prof.update(noticed=noticed, reaped=reaped, entered=child[0], exiting=child[1])
        self.prof.update(minflt=usage.ru_minflt, sent=time.monotonic())
        header["prof"] = self.prof
        write_frame(self.ctl_out, header, stdout)

    def _sweep(self, pid: int) -> None:
        """Kill whatever the program left behind (daemons, orphans) and reap it."""
        if not self.is_init:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            return
        killed = False
        while True:
            try:
                wpid, _ = os.waitpid(-1, 0 if killed else os.WNOHANG)
            except ChildProcessError:
                return
            if wpid == 0:
                os.kill(-1, signal.SIGKILL)
                killed = True


def main(uid: int, workdir: str, cpus: tuple = ()) -> None:
    """Entry point (see worker.py): control on fds 0/1, log on fd 2, programs run as `uid` (0 =
    unchanged). Fds 0-2 are then handed to the programs' stdio (see Server). `cpus`, when the
    worker is pinned (sandbox/claims.py): (the CPU the server and its Python programs run on,
    the CPUs C++/Java programs and compilers may use)."""
    if cpus:
        childproc.pin(*cpus)
    os.environ.pop("LD_BIND_NOW", None)  # start-up only (bwrap.BIND_NOW): not the programs'
    ctl_in = os.dup(0)
    ctl_out = os.dup(1)
    log = os.dup(2)
    sys.stdout = sys.stderr = open(log, "w", buffering=1, encoding="utf-8", errors="replace")
    not_dumpable()
    site_paths()
    for sig in (signal.SIGXFSZ, signal.SIGPIPE):  # programs get the default actions (inherited)
        signal.signal(sig, signal.SIG_DFL)
    childproc.warm_up()
    try:
        Server(ctl_in, ctl_out, uid, workdir).serve()
    finally:
        remove_tree(workdir)
