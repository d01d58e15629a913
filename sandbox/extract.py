"""Pull the program out of a model response: the final answer after the reasoning, its fence.

    extract(response, reasoning, truncated=False, language="python") -> Extraction(...)
    extract_code(response, reasoning) -> str | None      (the code of `extract`, else None)

`reasoning` is the resolved `prompt.reasoning` (data/config.py; `auto` is resolved from the
model's chat template by data/prompting/reasoning.py where a tokenizer is at hand):
- `none`: the model does not reason; the whole response is the final answer.
- `think`: the model reasons first and ends its reasoning with `</think>` (Qwen3, DeepSeek-R1
  and its distills); the final answer is what follows the first `</think>`.
- `marker:END`: the same with another end marker, e.g. `marker:[/THINK]`.
- `auto` (unresolved, e.g. a generations file judged without a model): per response, `think`
  when it holds `<think>` or `</think>`, else `none`.

The rule, in order:
1. With reasoning, a response whose reasoning never ended (no end marker) is `unfinished`.
2. In the final answer, fences are read line by line: a line of 3+ backticks with an optional
   language (```python, ```py, ```cpp, bare ```) opens a block; a line of only backticks
   closes it. A block still open at the end (the response was cut inside it) makes the
   response `unfinished`: an earlier closed block is never judged in its place.
3. A response known to be truncated (`truncated`: it hit the token cap) whose answer has no
   closed block is `unfinished` too: its answer (unfenced code, or nothing yet) was cut.
4. Otherwise the code is the last block of the problem's language (`language`, Problem.language:
   python: ```python/```python3/```py; cpp: ```cpp/```c++/```cc/```cxx; java: ```java), else
   its last block of any language, else (no fence at all) the whole answer text.
5. Nothing left (empty answer or empty block): `no_code` (scored WA by the judge).
An `unfinished` response is not judged: its verdict is `unfinished`, reward 0
(sandbox/verdict.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

# the values of `prompt.reasoning` are data/'s (data/prompting/reasoning.py); sandbox/ lies above
from microcoder.data.prompting.reasoning import MARKER_PREFIX, THINK_END, check_reasoning

_OPEN = re.compile(r"^[ \t]*(`{3,})[ \t]*([\w+.#-]*)")
_CLOSE = re.compile(r"^[ \t]*(`{3,})[ \t]*$")
FENCES = {
    "python": ("python", "python3", "py"),
    "cpp": ("cpp", "c++", "cc", "cxx"),
    "java": ("java",),
}
"""The fence languages that name each Problem.language."""


@dataclass(frozen=True)
class Extraction:
    """What one response gives the judge."""

    code: str | None
    """The program to judge (None unless status is "ok")."""
    status: Literal["ok", "no_code", "unfinished"]
    """`ok`: judge `code`; `no_code`: nothing to run (WA); `unfinished`: the response was cut
    inside its reasoning or its final code block (verdict `unfinished`, reward 0)."""
    reason: str = ""
    """Why it is not `ok`, for the verdict's message."""


def reasoning_end(reasoning: str, response: str = "") -> str | None:
    """The string that ends the reasoning under `reasoning` (None: no reasoning)."""
    check_reasoning(reasoning)
    if reasoning == "auto":
        return THINK_END if ("<think>" in response or THINK_END in response) else None
    if reasoning == "think":
        return THINK_END
    if reasoning.startswith(MARKER_PREFIX):
        return reasoning[len(MARKER_PREFIX) :]
    return None


def _blocks(answer: str) -> tuple[list[tuple[str, str]], bool]:
    """([(language, body)] of the closed blocks in order, whether a block is left open)."""
    blocks: list[tuple[str, str]] = []
    lang = ""
    body = []
    ticks = 0
    for line in answer.splitlines(keepends=True):
        if not ticks:
            m = _OPEN.match(line)
            if m:
                lang = m.group(2).lower()
                body = []
                ticks = len(m.group(1))
            continue
        m = _CLOSE.match(line.rstrip("\r\n"))
        if m and len(m.group(1)) >= ticks:
            blocks.append((lang, "".join(body)))
            ticks = 0
        else:
            body.append(line)
    return blocks, ticks > 0


def extract(
    response: str, reasoning: str = "none", truncated: bool = False, language: str = "python"
) -> Extraction:
    """The final answer's program under the rule of the module docstring; `truncated`: the
    response hit the token cap (rule 3; unknown = False); `language`: the problem's."""
    end = reasoning_end(reasoning, response)
    answer = response
    if end is not None:
        _, found, answer = response.partition(end)
        if not found:
            return Extraction(None, "unfinished", f"the reasoning never ended (no {end})")
    blocks, left_open = _blocks(answer)
    if left_open:
        return Extraction(None, "unfinished", "the final code block is not closed")
    if truncated and not blocks:
        return Extraction(None, "unfinished", "cut at the token cap before a closed code block")
    fences = FENCES[language]
    own = [body for lang, body in blocks if lang in fences]
    if own:
        code = own[-1]
    elif blocks:
        code = blocks[-1][1]
    else:
        code = answer
    if not code.strip():
        return Extraction(None, "no_code", "no code found in the response")
    return Extraction(code, "ok")


def extract_code(response: str, reasoning: str = "none", language: str = "python") -> str | None:
    """The code `extract` finds, or None (no code, or an unfinished response)."""
    return extract(response, reasoning, language=language).code
