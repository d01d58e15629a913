"""The fork server's environment helpers (stdlib only; they run inside the sandbox)."""

from __future__ import annotations

import os
import sys

_TICK = os.sysconf("SC_CLK_TCK")
_PR_SET_DUMPABLE = 4


def remove_tree(path: str) -> None:
    """Delete a file or a whole tree, best effort (shutil is not imported: its compression
    modules would enlarge the server that every run forks)."""
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            for root, dirs, files in os.walk(path, topdown=False):
                for name in files:
                    os.unlink(os.path.join(root, name))
                for name in dirs:
                    remove_tree(os.path.join(root, name))
            os.rmdir(path)
        else:
            os.unlink(path)
    except OSError:
        pass


def site_paths() -> None:
    """What `site` gives a program, without running .pth import lines: the server starts with
    -S, then gets quit()/exit()/help, the site-packages directories and the path lines of their
    .pth files. (Executable .pth lines would run in the server, so every forked program would
    carry what they import; on the development box one imports certifi, shutil, lzma, ...,
    which made each run ~30% dearer.)"""
    import site  # with -S, importing site does not run site.main()

    site.setquit()
    site.setcopyright()
    site.sethelper()
    for base in site.getsitepackages():
        if not os.path.isdir(base) or base in sys.path:
            continue
        sys.path.append(base)
        for name in sorted(os.listdir(base)):
            if not name.endswith(".pth"):
                continue
            try:
                with open(os.path.join(base, name), encoding="utf-8") as f:
                    lines = f.read().splitlines()
            except (OSError, UnicodeDecodeError):
                continue
            for line in lines:
                line = line.strip()
                if not line or line.startswith(("#", "import ", "import\t")):
                    continue
                path = os.path.join(base, line)
                if os.path.isdir(path) and path not in sys.path:
                    sys.path.append(path)


def not_dumpable() -> None:
    """No ptrace of the server and no /proc/1/mem for its programs. (Not via a change of the
    effective gid, which would do it without ctypes: that also clears --die-with-parent.)"""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError, ImportError):
        pass


def proc_cpu(pid: int) -> float:
    """CPU seconds a process has used so far (0.0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK
    except (OSError, IndexError, ValueError):
        return 0.0
