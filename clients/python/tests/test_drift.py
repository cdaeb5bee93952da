"""The client against the API's contract: its types are openapi.yaml's as generated now, every
problem code the server has is one it knows, and every route it calls exists. These fail when the
API changes and the client does not."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import get_args, get_type_hints

import pytest

from conftest import REPO
from replcast import ERROR_CODES, ProcessSignal
from replcast._shared import ROUTES
from replcast.types import OPERATIONS, SignalRequest

GENERATOR = Path(__file__).resolve().parents[1] / "tools" / "gen_types.py"
TYPES = Path(__file__).resolve().parents[1] / "src" / "replcast" / "types.py"


def repo_file(path: str) -> Path:
    f = REPO / path
    if not f.exists():
        pytest.skip(f"{path} is not here: the tests run outside the replcast repository")
    return f


def test_generated_types_are_current_run_npm_run_openapi_after_an_api_change() -> None:
    spec = repo_file("openapi.yaml")
    loader = importlib.util.spec_from_file_location("gen_types", GENERATOR)
    assert loader is not None and loader.loader is not None
    gen = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(gen)
    assert TYPES.read_text(encoding="utf-8") == gen.generate(spec)


def test_the_client_knows_every_problem_code_the_server_has() -> None:
    source = repo_file("src/errors.ts").read_text(encoding="utf-8")
    registry = source[source.index("export const ERRORS = {"):]
    registry = registry[: registry.index("} as const")]
    server = re.findall(r"^  ([a-z_]+): \{ status: \d+", registry, re.M)
    assert len(server) > 20
    assert sorted(ERROR_CODES) == sorted(server)


def test_every_route_the_client_calls_is_in_the_api() -> None:
    assert set(ROUTES.values()) <= OPERATIONS, set(ROUTES.values()) - OPERATIONS


def test_the_signals_a_process_may_be_sent_are_the_apis() -> None:
    assert get_args(ProcessSignal) == get_args(get_type_hints(SignalRequest)["signal"])
