"""LiveCodeBench `code_generation_lite` rows → Problem.

Public tests are a JSON list of `{input, output, testtype}`. Private tests are either the same
JSON or (the released files) base64(zlib(pickle(JSON string))); the pickle is opened with
`safe_pickle.PlainUnpickler`, which refuses every global, so a tampered row cannot run code.
`metadata.func_name` present → `functional` with that `fn_name`, else `stdin`.
`tests` = public + private; the public ones (the statement's examples) are also
`public_tests`, what a repair environment may show the model.
"""

from __future__ import annotations

from microcoder.data.formats.common import RowContext, json_value, str_pairs
from microcoder.data.formats.safe_pickle import UnsafePickleError, decode_b64_zlib_pickle
from microcoder.data.problem import Problem


def _as_cases(value, ctx: RowContext, field_name: str) -> list[dict[str, str]]:
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return []
        if text[0] in "[{":
            value = json_value(text, ctx, field_name)
        else:
            try:
                value = decode_b64_zlib_pickle(text)
            except UnsafePickleError as e:
                raise ctx.error(field_name, f"refused: {e}") from None
            except ValueError as e:
                raise ctx.error(field_name, f"not JSON nor base64+zlib+pickle: {e}") from None
            if isinstance(value, (str, bytes)):
                value = json_value(value, ctx, field_name, "decoded blob is not JSON")
    if not isinstance(value, list):
        raise ctx.error(field_name, f"expected a list of tests, got {type(value).__name__}")
    return str_pairs(value, ctx, field_name)


def _metadata(row: dict, ctx: RowContext) -> dict:
    meta = row.get("metadata") or {}
    if isinstance(meta, str):
        meta = json_value(meta, ctx, "metadata") if meta.strip() else {}
    if not isinstance(meta, dict):
        raise ctx.error("metadata", f"expected an object, got {type(meta).__name__}")
    return meta


def convert_lcb(row: dict, ctx: RowContext) -> Problem:
    """Convert one LiveCodeBench code_generation_lite row (public + private tests)."""
    qid = ctx.require(row, "question_id", (str, int))
    content = ctx.require(row, "question_content", str)
    if "public_test_cases" not in row and "private_test_cases" not in row:
        raise ctx.error(
            "public_test_cases",
            "missing (this looks like an LCB submissions/eval file, which has no tests)",
        )
    public = _as_cases(row.get("public_test_cases") or [], ctx, "public_test_cases")
    private = _as_cases(row.get("private_test_cases") or [], ctx, "private_test_cases")
    if not public and not private:
        raise ctx.error("public_test_cases", "no tests (public and private both empty)")
    fn_name = str(_metadata(row, ctx).get("func_name") or "")
    return Problem(
        id=str(qid),
        kind="functional" if fn_name else "stdin",
        prompt=content,
        tests=public + private,
        public_tests=[dict(t) for t in public],
        fn_name=fn_name,
        starter_code=row.get("starter_code") or "",
        difficulty=str(row.get("difficulty") or ""),
        platform=str(row.get("platform") or ""),
        date=str(row.get("contest_date") or ""),
        source="LiveCodeBench",
        meta={"title": row.get("question_title") or "", "n_public_tests": len(public)},
    )
