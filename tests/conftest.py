"""Shared fixtures: the local OpenAI-compatible server and the shared data folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_openai import FakeOpenAI

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent


@pytest.fixture
def fake_openai():
    """A started :class:`fake_openai.FakeOpenAI` on 127.0.0.1; script it through its attributes."""
    server = FakeOpenAI().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def shared_data() -> Path:
    """``../shared/data`` relative to the repository root; skips when it is absent."""
    path = REPO.parent / "shared" / "data"
    if not path.is_dir():
        pytest.skip(f"shared data not available at {path}")
    return path


def exit_code(argv: list[str]) -> int:
    """``recjudge argv``'s exit status, whether argparse refused a value (it exits) or the settings did
    (main returns 2)."""
    from recjudge.cli import main

    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code
