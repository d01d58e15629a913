from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "data"


@pytest.fixture
def fixture_path():
    """Path of a loader fixture file by name (tests/fixtures/data/<name>)."""
    return lambda name: FIXTURES / name
