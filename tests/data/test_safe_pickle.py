import base64
import os
import pickle
import zlib

import pytest

from microcoder.data.formats.loaders import load_problems
from microcoder.data.formats.safe_pickle import (
    UnsafePickleError,
    decode_b64_zlib_pickle,
    plain_unpickle,
)


class _SystemCall:
    def __reduce__(self):
        return (os.system, ("touch pwned_by_pickle",))


class _Eval:
    def __reduce__(self):
        return (eval, ("open('pwned_by_eval', 'w')",))


def test_plain_data_round_trips():
    value = {"a": [1, 2.5, None, True, "x"], "b": (1, 2)}
    assert plain_unpickle(pickle.dumps(value)) == value


@pytest.mark.parametrize("evil", [_SystemCall(), _Eval()])
def test_reduce_payloads_are_refused_and_never_run(evil, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for protocol in (0, 2, pickle.HIGHEST_PROTOCOL):
        with pytest.raises(UnsafePickleError, match="global"):
            plain_unpickle(pickle.dumps(evil, protocol=protocol))
    assert list(tmp_path.iterdir()) == []


def test_any_class_instance_is_refused():
    with pytest.raises(UnsafePickleError):
        plain_unpickle(pickle.dumps(ValueError("x")))


def test_blob_decoding_matches_the_lcb_encoding():
    blob = base64.b64encode(zlib.compress(pickle.dumps('[{"input": "1"}]'))).decode()
    assert decode_b64_zlib_pickle(blob) == '[{"input": "1"}]'


def test_blobs_that_inflate_too_far_are_refused():
    blob = base64.b64encode(zlib.compress(pickle.dumps("x" * 100_000))).decode()
    with pytest.raises(UnsafePickleError, match="inflates"):
        decode_b64_zlib_pickle(blob, limit=1000)


def test_malicious_fixture_row_is_rejected_without_running(fixture_path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = load_problems(fixture_path("lcb.jsonl"), strict=False)
    evil = [r for r in result.rejects if r.line == 4]
    assert evil and evil[0].field == "private_test_cases" and "refused" in evil[0].reason
    assert not (tmp_path / "microcoder_pickle_pwned").exists()
