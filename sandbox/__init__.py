"""The judge: isolated code execution, output comparison and the worker pool. No torch import.

Python API (for the executor actor; use from one thread):

    from microcoder.sandbox import JudgePool, Verdict, extract, extract_code
    pool = JudgePool(cfg)                    # cfg: ExecutorConfig (section [executor]); or
    pool = JudgePool(workers=4, early_exit=True)   # defaults + field overrides
    job = pool.submit(problem, code, solution_id="s1", tag=anything)   # -> int job id
    for v in pool.as_completed(timeout=None):   # Verdict records as they finish
        v.verdict, v.reward, v.passed, v.total, v.first_failed, v.tag, ...
    pool.judge(problem, code) -> Verdict;  pool.judge_many([(problem, code), ...]) -> [Verdict]
    ch = pool.channel()                       # submit/as_completed of its own for another thread
    pool.close()                              # or `with JudgePool(cfg) as pool:`
    extract(response, reasoning) -> Extraction(code, status, reason)   # the final answer's code
    extract_code(response, reasoning) -> str | None   # None: submit it anyway, it is scored WA
    unfinished_verdict(total, reason)          # status "unfinished": not judged, reward 0

`problem` is a microcoder.data.problem.Problem (kinds stdin / functional / assert; languages
python, cpp, java: CE = a syntax error or a failed compile). Verdicts:
AC WA TLE MLE OLE RE CE SE unfinished (OLE = more output than the test's cap, which grows with
the expected output, see ExecutorConfig.output_limit_kb; SE = sandbox fault, already retried `retries` times,
reward None: do not score it; `unfinished` = the response was cut inside its reasoning or its
final code block, or at the token cap before a closed block; never sent to the pool:
sandbox/extract.py). A crashed or hung worker is replaced transparently. JudgePool raises
SandboxUnavailable (with the fix) when bwrap is missing and isolation is not "none".

Threat model. Covered (isolation = "bwrap", the default): programs run in forked children of a
warm fork server inside bubblewrap: no network (own net namespace), own PID/IPC/UTS namespaces,
an empty root with only /usr, the interpreter prefix and the fork server's code, read-only; a
private size-capped /tmp; no environment variables but PATH/HOME/LANG. A program never sees
expected outputs (compared in the judge process; the fork server never receives them), problem
files, the judge's environment, the host's home or project directories. Limits per run: CPU time
(primary, robust under load) and wall clock (wall_factor × limit), address space, file size
(= the test's output cap, also bounds /tmp files; the fork server reads at most the cap of a
run's stdout and of a functional program's returned values, and sends the judge nothing of an
output over its cap), open files, and a process count that holds for root
(programs run as a dedicated host uid per worker via a user namespace mapping, claimed host-wide
from `sandbox_uid_base` through lock files, sandbox/claims.py, so no two workers of any pools on the
host share one; RLIMIT_NPROC is ignored only for uid 0). The fork server is PID 1 of its namespace (a
program cannot kill it), non-dumpable (no ptrace or /proc/1/mem) and runs as another uid; after
every run it kills every process left in the namespace, so daemons do not outlive their test;
before the next solution it empties the private /tmp if anything was written there (files a
solution leaves are never seen by another). Stdin, stdout and stderr are real file descriptors
(memfds), and the program cannot reach the fork server's control pipe. With early exit no test
runs after the first failing one (the fork server waits for the judge's verdict on each run).
The interpreter starts without `site` (-S): programs get quit()/exit(), the site-packages
directories and the path lines of their .pth files, but .pth import lines are not executed.
Per language. Python: the above, the program forked from the warm interpreter. C++ and Java
(sandbox/languages.py): the compiler runs inside the same sandbox, as the programs' uid, under
its own limits (executor.compile_time_s of CPU, compile_memory_mb), in the program's fresh
working directory, which is emptied before the next program (no build is cached across
programs); the binary (or `java`) is exec'd per test from a forked child of the fork server, so
namespaces, mounts, uid, the process count, CPU/wall time, file size, open files and the
cleanup after every run hold exactly as for Python. Memory: C++ runs under the address-space
limit (the stack limit equals it); the JVM cannot start under an address-space limit equal to
the memory limit, so its heap is capped at the memory limit (-Xmx), its other reservations are
sized down, and the address space is capped at the memory limit + 1 GiB; it may run 32 threads
beside `max_processes`. The JVM's configuration directory (Debian: /etc/java-N-openjdk) is
mounted read-only where a JDK is installed.
Not covered: kernel exploits (no seccomp filter); CPU and memory-bandwidth contention between
workers (timing side effects); programs can read world-readable files under /usr and the
interpreter prefix; a program may use up to `max_processes` processes and `tmpfs_mb` of /tmp
(RAM). With isolation = "none" (trusted code only; the judge warns loudly) only the rlimits
(no process count), a scrubbed environment and a private working directory remain.
"""

from microcoder.sandbox.bwrap import SandboxUnavailable
from microcoder.sandbox.config import ExecutorConfig
from microcoder.sandbox.extract import Extraction, extract, extract_code
from microcoder.sandbox.pool import JudgePool
from microcoder.sandbox.verdict import UNFINISHED, VERDICTS, Verdict, unfinished_verdict

__all__ = [
    "UNFINISHED",
    "VERDICTS",
    "ExecutorConfig",
    "Extraction",
    "JudgePool",
    "SandboxUnavailable",
    "Verdict",
    "extract",
    "extract_code",
    "unfinished_verdict",
]
