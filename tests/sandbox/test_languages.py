"""C++ and Java: verdicts (AC, WA, CE, TLE, RE, MLE) and the isolation tests of test_hostile.py
(network, files, fork bombs, memory, time, output size), each program written in both languages.

Like test_hostile.py, a hostile program WOULD get AC if the protection were missing (it prints
what it managed to do, and the expected output says it succeeded). Skipped where the host lacks
g++ or a JDK (sandbox/languages.py names the package).
"""

from __future__ import annotations

import os

import pytest

from microcoder.data.corpus.verify import verify_references
from microcoder.data.problem import validate_problem
from microcoder.sandbox import JudgePool, SandboxUnavailable, languages
from microcoder.sandbox.languages import java_class, missing_tools

from .conftest import loopback_listener

LANGUAGES = [
    pytest.param(
        lang, marks=pytest.mark.skipif(bool(missing_tools([lang])), reason=f"no {lang} toolchain")
    )
    for lang in ("cpp", "java")
]


@pytest.fixture(scope="module")
def pool():
    p = JudgePool(workers=2, time_limit_s=2.0, wall_factor=2.0)
    yield p
    p.close()


def problem(language: str, tests: list[tuple[str, str]], time_limit: float = 2.0, **extra):
    rows = [{"input": i, "output": o} for i, o in tests]
    row = {"id": f"{language}-p", "kind": "stdin", "language": language, "tests": rows}
    return validate_problem({**row, "time_limit_s": time_limit, **extra})


def expect(language: str, output: str, time_limit: float = 2.0):
    return problem(language, [("", output)], time_limit)


def java_main(body: str, imports: str = "import java.util.*; import java.io.*;") -> str:
    return f"{imports}\npublic class Main {{ public static void main(String[] args) throws Exception {{\n{body}\n}} }}\n"


def cpp_main(body: str) -> str:
    return f"#include <bits/stdc++.h>\n#include <unistd.h>\n#include <sys/socket.h>\n#include <netinet/in.h>\n#include <arpa/inet.h>\n#include <sys/wait.h>\nusing namespace std;\nint main() {{\n{body}\n}}\n"


SUM = {
    "cpp": cpp_main("long long a, b; cin >> a >> b; cout << a + b << endl; return 0;"),
    "java": java_main(
        "Scanner s = new Scanner(System.in); System.out.println(s.nextLong() + s.nextLong());"
    ),
}
SUM_TESTS = [("1 2\n", "3\n"), ("40 2\n", "42\n")]


def assert_healthy(pool, language: str) -> None:
    assert pool.judge(problem(language, SUM_TESTS), SUM[language]).verdict == "AC"


# -- verdicts ------------------------------------------------------------------------------

VERDICT_PROGRAMS = {
    "AC": SUM,
    "WA": {
        "cpp": cpp_main("long long a, b; cin >> a >> b; cout << a - b << endl;"),
        "java": java_main(
            "Scanner s = new Scanner(System.in); System.out.println(s.nextLong() - s.nextLong());"
        ),
    },
    "CE": {"cpp": "int main() { return undeclared; }", "java": "public class Main { void f( }"},
    "TLE": {
        "cpp": cpp_main("volatile unsigned long x = 0; while (true) x++;"),
        "java": java_main(
            "long x = 0; while (true) { x++; if (x == -1) break; } System.out.println(x);"
        ),
    },
    "RE": {
        "cpp": cpp_main("vector<int> v; return v.at(5);"),
        "java": java_main("int[] a = new int[1]; System.out.println(a[5]);"),
    },
    "MLE": {
        "cpp": cpp_main("vector<vector<char>> v; while (true) { v.emplace_back(1 << 24, 1); } "),
        "java": java_main(
            "List<long[]> l = new ArrayList<>(); while (true) l.add(new long[1 << 20]);"
        ),
    },
}


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("verdict", list(VERDICT_PROGRAMS))
def test_verdicts(pool, language, verdict):
    limit = 1.0 if verdict == "TLE" else 3.0  # a loaded host: the JVM's start takes wall time
    v = pool.judge(problem(language, SUM_TESTS, limit), VERDICT_PROGRAMS[verdict][language])
    assert v.verdict == verdict, v
    assert v.reward == (1.0 if verdict == "AC" else 0.0)
    if verdict == "CE":  # the compiler's own message reaches the verdict
        assert "error" in v.message and v.first_failed == 0


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_compiled_program_is_not_kept_for_the_next(pool, language):
    """Nothing is cached across programs: a failed compile after a good one is CE, not the
    previous binary run again."""
    p = problem(language, SUM_TESTS)
    for _ in range(2):  # both workers, so one of them just ran the good one
        assert pool.judge(p, SUM[language]).verdict == "AC"
    broken = {"cpp": "this is not C++", "java": "this is not Java"}[language]
    for _ in range(2):
        assert pool.judge(p, broken).verdict == "CE"


def test_compile_time_limit_is_ce():
    """A compile past `compile_time_s` is stopped: CE naming the limit."""
    if missing_tools(["cpp"]):
        pytest.skip("no g++")
    slow = (
        "template<int N> struct F { static const long v = F<N-1>::v + F<N-2>::v + F<N-3>::v; };\n"
        "template<> struct F<0> { static const long v = 1; };\ntemplate<> struct F<1> { static const long v = 1; };\n"
        "template<> struct F<2> { static const long v = 1; };\n"
        "#include <bits/stdc++.h>\nint main() { std::cout << F<3>::v; }\n"
    )
    with JudgePool(workers=1, compile_time_s=0.05, wall_factor=1.0) as p:
        v = p.judge(problem("cpp", [("", "3")]), slow)
    assert v.verdict == "CE" and "time limit" in v.message


def test_java_class_rule():
    assert java_class("import x;\npublic final class Sol { }\nclass Main {}") == "Sol"
    assert (
        java_class("class Pair {}\nclass Main { public static void main(String[] a) {} }") == "Main"
    )
    assert java_class("class Pair {}\nclass Solver {}") == "Pair"


@pytest.mark.skipif(bool(missing_tools(["java"])), reason="no JDK")
def test_java_public_class_not_main_runs(pool):
    code = "import java.util.*;\npublic class Solution { public static void main(String[] a) { Scanner s = new Scanner(System.in); System.out.println(s.nextInt() + s.nextInt()); } }"
    assert pool.judge(problem("java", SUM_TESTS), code).verdict == "AC"


# -- isolation: the programs of test_hostile.py, per language ------------------------------

HOSTILE = {
    "fork_bomb": {
        "cpp": cpp_main(
            "int n = 0; for (int i = 0; i < 200; i++) { pid_t p = fork(); if (p < 0) break; "
            "if (p == 0) { sleep(5); _exit(0); } n++; } cout << n << endl;"
        ),
        "java": java_main(
            "int n = 0; try { for (int i = 0; i < 200; i++) { Thread t = new Thread(() -> { "
            "try { Thread.sleep(5000); } catch (Exception e) {} }); t.setDaemon(true); t.start(); n++; } "
            "} catch (Throwable e) {} System.out.println(n); System.exit(0);"
        ),
    },
    "memory": {
        "cpp": cpp_main(
            'char *volatile p = new char[3UL << 30]; memset(p, 1, 3UL << 30); cout << (p[12345] == 1 ? "ok" : "no") << endl;'
        ),
        "java": java_main('byte[][] b = new byte[3][1 << 30]; System.out.println("ok");'),
    },
    "sleep": {
        "cpp": cpp_main('sleep(60); cout << "done" << endl;'),
        "java": java_main('Thread.sleep(60000); System.out.println("done");'),
    },
    "disk_fill": {
        "cpp": cpp_main(
            "string mb(1 << 20, 'x'); int n = 0; for (int i = 0; i < 400; i++) { "
            'FILE *f = fopen(("/tmp/fill" + to_string(i)).c_str(), "wb"); if (!f) break; '
            "size_t w = fwrite(mb.data(), 1, mb.size(), f); if (fclose(f) != 0 || w != mb.size()) break; n++; } cout << n << endl;"
        ),
        "java": java_main(
            "byte[] mb = new byte[1 << 20]; int n = 0; try { for (int i = 0; i < 400; i++) { "
            'try (FileOutputStream f = new FileOutputStream("/tmp/fill" + i)) { f.write(mb); } n++; } '
            "} catch (Throwable e) {} System.out.println(n);"
        ),
    },
    "output_flood": {
        "cpp": cpp_main(
            "string mb(1 << 20, 'x'); for (int i = 0; i < 1024; i++) fwrite(mb.data(), 1, mb.size(), stdout); puts(\"done\");"
        ),
        "java": java_main(
            "byte[] mb = new byte[1 << 20]; java.util.Arrays.fill(mb, (byte) 'x'); "
            'for (int i = 0; i < 1024; i++) System.out.write(mb, 0, mb.length); System.out.println("done");'
        ),
    },
}


@pytest.mark.parametrize("language", LANGUAGES)
def test_fork_bomb_is_bounded(pool, language):
    v = pool.judge(expect(language, "200"), HOSTILE["fork_bomb"][language])
    assert v.verdict != "AC" and v.stdout.strip() != "200"
    assert_healthy(pool, language)


@pytest.mark.parametrize("language", LANGUAGES)
def test_memory_bomb_is_mle(pool, language):
    v = pool.judge(expect(language, "ok"), HOSTILE["memory"][language])
    assert v.verdict == "MLE", v
    assert_healthy(pool, language)


@pytest.mark.parametrize("language", LANGUAGES)
def test_infinite_loop_is_tle(pool, language):
    v = pool.judge(expect(language, "0", 0.5), VERDICT_PROGRAMS["TLE"][language])
    assert v.verdict == "TLE"
    assert_healthy(pool, language)


@pytest.mark.parametrize("language", LANGUAGES)
def test_sleeping_program_is_stopped_by_the_wall_clock(pool, language):
    v = pool.judge(expect(language, "done", 0.3), HOSTILE["sleep"][language])
    assert v.verdict == "TLE"
    assert_healthy(pool, language)


@pytest.mark.parametrize("language", LANGUAGES)
def test_disk_fill_is_bounded(pool, language):
    v = pool.judge(expect(language, "400", 5.0), HOSTILE["disk_fill"][language])
    assert v.verdict != "AC"
    assert not any(name.startswith("fill") for name in os.listdir("/tmp"))
    assert_healthy(pool, language)


@pytest.mark.parametrize("language", LANGUAGES)
def test_output_flood_is_cut(pool, language):
    v = pool.judge(expect(language, "x" * 100, 10.0), HOSTILE["output_flood"][language])
    assert v.verdict == "OLE" and "output limit" in v.message
    assert_healthy(pool, language)


@pytest.mark.parametrize("language", LANGUAGES)
def test_secret_file_outside_the_sandbox_is_invisible(pool, language, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("file-s3cr3t")
    code = {
        "cpp": cpp_main(f'ifstream f("{secret}"); string s; f >> s; cout << s << endl;'),
        "java": java_main(
            f'System.out.println(new String(java.nio.file.Files.readAllBytes(java.nio.file.Path.of("{secret}"))));'
        ),
    }[language]
    assert pool.judge(expect(language, "file-s3cr3t"), code).verdict != "AC"
    assert secret.read_text() == "file-s3cr3t"
    assert_healthy(pool, language)


@pytest.mark.parametrize("language", LANGUAGES)
def test_network_to_host_loopback_is_unreachable(pool, language):
    with loopback_listener() as (port, got):
        code = {
            "cpp": cpp_main(
                "int s = socket(AF_INET, SOCK_STREAM, 0); sockaddr_in a{}; a.sin_family = AF_INET; "
                f'a.sin_port = htons({port}); inet_pton(AF_INET, "127.0.0.1", &a.sin_addr); '
                "if (connect(s, (sockaddr *) &a, sizeof a) != 0) return 1; "
                'send(s, "pwned", 5, 0); cout << "connected" << endl;'
            ),
            "java": java_main(
                f'java.net.Socket s = new java.net.Socket("127.0.0.1", {port}); '
                's.getOutputStream().write("pwned".getBytes()); System.out.println("connected");'
            ),
        }[language]
        v = pool.judge(expect(language, "connected"), code)
    assert v.verdict != "AC" and got == []
    assert_healthy(pool, language)


def test_a_missing_compiler_is_named_at_start(monkeypatch):
    """A host without javac: `data build`'s verification (like an executor's start) stops
    before judging anything, naming the package to install."""
    real = languages.tool_path
    monkeypatch.setattr(
        languages, "tool_path", lambda name: None if name == "javac" else real(name)
    )
    languages.check_compilers(["python", "cpp"])  # nothing missing for these
    ref = validate_problem(
        {
            "id": "j",
            "kind": "stdin",
            "language": "java",
            "tests": [{"input": "", "output": "1"}],
            "solutions": ["public class Main {}"],
        }
    )
    with pytest.raises(
        SandboxUnavailable, match="java needs javac: install .*openjdk-17-jdk-headless"
    ):
        verify_references([ref], progress=False)
