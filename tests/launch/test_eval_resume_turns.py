"""`microcoder eval --resume` refuses a folder written with other turns (launch/jobs/eval_inputs.py
`check_resume`, the `multi_turn` key): a trajectory's records are not a single turn's. A folder
written before the key existed resumes as a single-turn one."""

from __future__ import annotations

import json

import pytest

from microcoder.launch.jobs.eval_inputs import RESUME_KEYS, check_resume

SAME = {k: None for k in RESUME_KEYS if k != "multi_turn"}


def test_other_turns_are_refused_and_an_old_folder_resumes_single_turn(tmp_path):
    two = {"kind": "repair", "max_turns": 2}
    (tmp_path / "settings.json").write_text(json.dumps({**SAME, "multi_turn": two}))
    check_resume(tmp_path, {**SAME, "multi_turn": two})
    with pytest.raises(ValueError, match="multi_turn"):
        check_resume(tmp_path, {**SAME, "multi_turn": None})
    with pytest.raises(ValueError, match="multi_turn"):
        check_resume(tmp_path, {**SAME, "multi_turn": {**two, "max_turns": 3}})
    (tmp_path / "settings.json").write_text(json.dumps(SAME))  # before the key existed
    check_resume(tmp_path, {**SAME, "multi_turn": None})
