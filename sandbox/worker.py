"""Host side of one fork server: start it, exchange frames with it, replace it when it breaks."""

from __future__ import annotations

import os
import select
import subprocess
import tempfile

from microcoder.sandbox.bwrap import BIND_NOW, needs_host_uid, sandbox_command
from microcoder.sandbox.config import ExecutorConfig
from microcoder.sandbox.frames import FrameError, FrameReader, encode_frame, write_all, write_frame

START_TIMEOUT_S = 60.0
"""How long a fresh fork server may take to say it is ready."""


class WorkerCrash(RuntimeError):
    """The fork server died, hung or broke the protocol (a sandbox fault, verdict SE)."""


class WorkerProcess:
    """One fork server process; not thread-safe (one pool thread owns it)."""

    def __init__(self, cfg: ExecutorConfig, slot: int):
        from microcoder.sandbox.claims import claim_cpu, claim_uid

        self.cfg = cfg
        self.slot = slot
        # as root, a host uid of its own for its programs, held until close() (sandbox/claims.py)
        self.uid_claim = claim_uid(cfg.sandbox_uid_base) if needs_host_uid(cfg) else None
        # a CPU of its own for its server, its programs and the thread that drives it
        self.cpu_claim = claim_cpu() if cfg.pin_cpus else None
        self.proc: subprocess.Popen | None = None
        self.reader: FrameReader | None = None
        self.log = tempfile.TemporaryFile()
        self.starts = 0

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self) -> None:
        self.stop()
        claim = self.cpu_claim
        cpus = (claim.cpu, claim.allowed) if claim else ()
        argv, fds = sandbox_command(self.cfg, self.host_uid, cpus)
        try:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self.log,
                pass_fds=fds,
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", **BIND_NOW},
                start_new_session=True,
            )
        finally:
            for fd in fds:
                os.close(fd)
        self.starts += 1
        self.reader = FrameReader(self.proc.stdout.fileno())
        header, _ = self.recv(START_TIMEOUT_S)
        if header.get("op") != "ready":
            raise WorkerCrash(f"fork server said {header.get('op')!r} instead of ready")

    def send(self, header: dict, payload: bytes = b"") -> None:
        self.send_encoded(encode_frame(header, payload))

    def send_encoded(self, frame: bytes) -> None:
        """Send a frame already encoded (frames.encode_frame, or frames.NEXT / STOP)."""
        try:
            write_all(self.proc.stdin.fileno(), frame)
        except (OSError, AttributeError) as e:
            raise WorkerCrash(f"fork server is gone ({e}){self._log_tail()}") from None

    def recv(self, timeout: float) -> tuple[dict, bytes]:
        reader = self.reader
        if not reader.complete():  # else a frame read along with the last one is waiting
            ready, _, _ = select.select([reader.fd], [], [], timeout)
            if not ready:
                raise WorkerCrash(f"fork server did not answer within {timeout:.0f} s")
        try:
            return reader.read()
        except (FrameError, OSError) as e:
            raise WorkerCrash(f"fork server stream broke ({e}){self._log_tail()}") from None

    def _log_tail(self) -> str:
        try:
            self.log.seek(0, os.SEEK_END)
            size = self.log.tell()
            self.log.seek(max(0, size - 600))
            tail = self.log.read().decode("utf-8", "replace").strip()
        except OSError:
            return ""
        return f"; its log: {tail}" if tail else ""

    def stop(self) -> None:
        """Ask the server to exit, then make sure it (and its sandbox) is gone."""
        proc = self.proc
        self.proc = None
        self.reader = None
        if proc is None:
            return
        try:
            write_frame(proc.stdin.fileno(), {"op": "exit"})
        except OSError:
            pass
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for stream in (proc.stdin, proc.stdout):
            try:
                stream.close()
            except OSError:
                pass

    @property
    def host_uid(self) -> int | None:
        """The host uid its programs run as (root hosts, bwrap), else None."""
        return self.uid_claim.uid if self.uid_claim else None

    @property
    def cpu(self) -> int | None:
        """The CPU its server, programs and host thread run on (sandbox/claims.py), else None."""
        return self.cpu_claim.cpu if self.cpu_claim else None

    def close(self) -> None:
        self.stop()
        self.log.close()
        for claim in (self.uid_claim, self.cpu_claim):
            if claim is not None:
                claim.release()
