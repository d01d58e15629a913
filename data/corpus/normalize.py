"""Statement normalization for deduplication and decontamination.

Three levels, each built on the one before:
- `normalize_statement(text)`: the exact-duplicate form. Lower case; HTML tags and entities,
  markdown (headers, emphasis, code fences, inline code, links) and LaTeX markup (`$...$`,
  `\\le`, `\\text{...}`) removed, keeping the text; Unicode math signs spelled in ASCII
  (`≤` -> `<=`); whitespace collapsed. Idempotent. This is what is hashed.
- `content_text(text)`: the normalized statement with the *scaffolding* taken out: heading
  lines that every site adds ("Input Format", "Constraints", "Example 1:", "Sample Input 2")
  and metadata lines ("Time limit: 2 seconds", "memory limit per test: 256 megabytes",
  "input: standard input"). Copies of one problem on two sites differ mostly there.
- `content_words(text)`: the tokens of `content_text` with *variables masked*: every token
  used as a variable somewhere in the statement (before `[`, `=`, `<`, `<=`, `.length`, after a
  comparison, inside `[...]`) and every single letter becomes `_v`, so a copy that renamed
  `nums` to `arr` or `n` to `N` keeps its shingles.

`words(text)` is the plain token list of the normalized statement (letters and digits).
"""

from __future__ import annotations

import html
import re

_TAG = re.compile(r"</?[a-zA-Z][a-zA-Z0-9]*(?:\s[^<>]*)?/?>")
_FENCE = re.compile(r"^\s*(```|~~~)[\w+-]*\s*$", re.M)
_HEADER = re.compile(r"^\s{0,3}#{1,6}\s+", re.M)
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_STRONG = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_EMPH = re.compile(r"(?<![\w*])([*_])(?=[^\s*_])(.+?)(?<=[^\s*_])\1(?![\w*])")
_DOLLARS = re.compile(r"\${1,3}")
_LATEX_WRAP = re.compile(r"\\(?:text|mathrm|mathbf|mathit|texttt|textbf|operatorname)\{([^{}]*)\}")
_LATEX_CMD = re.compile(r"\\([a-zA-Z]+)")
_LATEX_SPACE = re.compile(r"\\[,;:! ]")
_SPACES = re.compile(r"[^\S\n]+")
_LINES = re.compile(r"\s*\n\s*")
_WORD = re.compile(r"[^\W_]+")

_LATEX_WORDS = {
    "le": "<=",
    "leq": "<=",
    "leqslant": "<=",
    "ge": ">=",
    "geq": ">=",
    "geqslant": ">=",
    "ne": "!=",
    "neq": "!=",
    "lt": "<",
    "gt": ">",
    "cdot": "*",
    "times": "*",
    "ldots": "...",
    "dots": "...",
    "cdots": "...",
    "lvert": "|",
    "rvert": "|",
    "mid": "|",
    "left": "",
    "right": "",
    "displaystyle": "",
    "quad": " ",
    "qquad": " ",
}
_UNICODE = str.maketrans(
    {
        "≤": "<=",
        "≥": ">=",
        "≠": "!=",
        "×": "*",
        "·": "*",
        "…": "...",
        "−": "-",
        "–": "-",
        "—": "-",
        "\u00a0": " ",
        "\u2009": " ",
        "\u200b": "",
        "’": "'",
        "‘": "'",
        "“": '"',
        "”": '"',
    }
)


def _latex_cmd(m: re.Match) -> str:
    name = m.group(1)
    return f" {_LATEX_WORDS[name]} " if name in _LATEX_WORDS else f" {name} "


def _normalize(text: str, keep_lines: bool) -> str:
    if "<" in text:
        text = _TAG.sub(" ", text)
    if "&" in text:
        text = html.unescape(text)
    text = text.translate(_UNICODE)
    if "`" in text or "~" in text:
        text = _FENCE.sub("", text).replace("`", "")
    if "#" in text:
        text = _HEADER.sub("", text)
    if "](" in text:
        text = _LINK.sub(r"\1", text)
    if "*" in text or "_" in text:
        text = _EMPH.sub(r"\2", _STRONG.sub(r"\2", text))
    if "$" in text:
        text = _DOLLARS.sub("", text)
    if "\\" in text:
        text = _LATEX_WRAP.sub(r"\1", text)
        text = _LATEX_SPACE.sub(" ", text)
        text = _LATEX_CMD.sub(_latex_cmd, text)
    if "{" in text or "}" in text:
        text = text.replace("{", " ").replace("}", " ")
    text = text.lower()
    if keep_lines:
        return _LINES.sub("\n", _SPACES.sub(" ", text)).strip()
    return " ".join(text.split())


def normalize_statement(text: str) -> str:
    """Lower case, markup (HTML, markdown emphasis/headers/code fences, LaTeX `$...$` kept as
    text without the `$`) removed, whitespace collapsed: the form hashed and shingled."""
    return _normalize(text, keep_lines=False)


def words(text: str) -> list[str]:
    """Tokens (runs of letters and digits) of the normalized statement."""
    return _WORD.findall(normalize_statement(text))


_HEADINGS = (
    r"(?:problem )?(?:statement|description)|input(?: format| specification)?|"
    r"output(?: format| specification)?|constraints?|notes?|examples?(?: \d+)?|"
    r"samples?(?: \d+)?|sample (?:input|output|test)s?(?: \d+)?|explanations?|"
    r"(?:input|output) (?:example|sample)s?(?: \d+)?|follow[- ]?up|hints?(?: \d+)?|"
    r"tags?|difficulty(?: \w+)?|interaction|scoring|subtasks?|(?:time|memory) complexity"
)
_HEADING_LINE = re.compile(rf"^(?:{_HEADINGS})\s*[:.]?$")
_EXAMPLE_HEADING = re.compile(r"^(?:examples?|samples?|sample tests?)(?: \d+)?\s*[:.]?$")
"""A heading that opens worked examples (content_text drops them)."""
_INSIDE_EXAMPLE = re.compile(
    r"^(?:input|output|explanations?|(?:sample |example )?(?:input|output)s?)(?: \d+)?\s*[:.]?$"
)
"""Headings inside an example block (they do not end it)."""
_CODE_LINE = re.compile(r"^(?:class \w+\s*(?:\([^)]*\))?\s*:|def \w+\s*\(.*\)\s*(?:->.*)?:|pass)$")
"""Starter-code lines some sites append to the statement (rllm's `class Solution: def f(...)`)."""
_META = (
    r"(?:time|memory) limit(?: per test)?\s*:?\s*[\d.]+\s*"
    r"(?:seconds?|secs?|s|ms|milliseconds?|megabytes?|mb|mib|kb|gb)\b|"
    r"(?:input|output)\s*:?\s*(?:standard (?:input|output)|stdin|stdout)\b|"
    r"(?:example|sample)(?: (?:input|output|test))?\s*\d*\s*:|"
    r"\b(?:input|output|explanation|constraints|note|notes|follow[- ]?up)\s*:"
)
_FRAMES = (
    r"please solve the programming task below (?:using|in) (?:a|an) [\w -]*?code snippet in "
    r"a markdown code block\.?|please complete the following python code precisely\s*:?|"
    r"(?:you will )?use the following starter code to write the solution to the problem and "
    r"enclose your code within delimiters\.?|read the inputs from stdin,? solve the problem,? "
    r"and write the answer to stdout[^.]*\.?"
)
"""Prompt frames datasets wrap statements in (rllm/DeepCoder, LiveCodeBench)."""
_META_RE = re.compile(f"{_META}|{_FRAMES}")
_META_CUES = ("limit", "standard", "stdin", "stdout", "please", "starter code")
_OPERATOR = re.compile(r"\[|!=|<=|>=|==|=|<|>|\.(?:length|size)\b")
_NAME_BEFORE = re.compile(r"(?<![\w.])([^\W\d_]\w*)\s*$")
_NAME_AFTER = re.compile(r"\s*([^\W\d_]\w*)")
_INDEX_AFTER = re.compile(r"\s*([^\W\d_]\w*)\s*\]")
_MAX_VAR_LEN = 16
MASK = "_v"
"""The token a masked variable becomes."""


def content_text(text: str) -> str:
    """The normalized statement without scaffolding headings, metadata lines and worked
    examples (one line per source line, joined by a space).

    Examples run from an example heading ("Example 1:", "Examples", "Sample Input 2") to the
    next heading that is not part of one ("Constraints", "Note", "Follow-up", ...). Sites copy
    the statement and re-draw the examples (LeetCodeDataset keeps them, rllm's copy of the same
    problem drops them: their shingle Jaccard was 0.3-0.6 with them, far below the threshold);
    the tests are compared by decontamination's identical-input check instead. Starter-code
    lines (`class solution:`, `def f(...) -> int:`) are dropped too: code, not statement."""
    kept = []
    in_examples = False
    for line in _normalize(text, keep_lines=True).split("\n"):
        if len(line) < 48 and _HEADING_LINE.match(line):
            if _EXAMPLE_HEADING.match(line):
                in_examples = True
            elif not _INSIDE_EXAMPLE.match(line):
                in_examples = False
            continue
        if in_examples or _CODE_LINE.match(line):
            continue
        if ":" in line or any(cue in line for cue in _META_CUES):
            line = _META_RE.sub(" ", line).strip()
        if line:
            kept.append(line)
    return " ".join(" ".join(kept).split())


def variables(content: str) -> set[str]:
    """Tokens used as variables in a content text (see the module docstring): a name right
    before `[` or `.length`, either side of `=`, `<`, `<=`, ..., or alone inside `[...]`."""
    found = set()
    for op in _OPERATOR.finditer(content):
        start = op.start()
        end = op.end()
        sign = op.group()
        before = _NAME_BEFORE.search(content, max(0, start - _MAX_VAR_LEN - 2), start)
        if before and (sign != "[" or before.end(1) == start):
            found.add(before.group(1))
        after = (_INDEX_AFTER if sign == "[" else _NAME_AFTER).match(content, end)
        if after and sign[0] != ".":
            found.add(after.group(1))
    return {w for v in found if len(v) <= _MAX_VAR_LEN for w in _WORD.findall(v)}


def content_words(text: str) -> list[str]:
    """Tokens of `content_text(text)` with variables and single letters replaced by MASK."""
    content = content_text(text)
    var = variables(content)
    return [
        MASK if (len(w) == 1 and w.isalpha()) or w in var else w for w in _WORD.findall(content)
    ]
