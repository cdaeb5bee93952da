"""Fixtures for the client's tests. The live tests run against the server named by REPLCAST_URL and
REPLCAST_API_KEY (test/python-client.test.ts in the repository starts one and sets them, with the
keys of two tenants with small quotas); without REPLCAST_URL they are skipped and only the offline
tests run."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest

from cutting_proxy import CuttingProxy
from replcast import Client, Session

REPO = Path(__file__).resolve().parents[3]


def env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.skip(f"{name} is not set: no server to test against")
    return value


@pytest.fixture(scope="session")
def url() -> str:
    return env("REPLCAST_URL")


@pytest.fixture(scope="session")
def api_key() -> str:
    return env("REPLCAST_API_KEY")


@pytest.fixture(scope="session")
def client(url: str, api_key: str) -> Iterator[Client]:
    with Client(url, api_key, reconnect_delay_s=0.05) as c:
        yield c


@pytest.fixture(scope="module")
def session(client: Client) -> Iterator[Session]:
    """One session shared by a module's tests (they run one after the other)."""
    with client.sessions.create(idle_timeout_s=300) as s:
        yield s


@pytest.fixture
def proxy(url: str) -> Iterator[CuttingProxy]:
    p = CuttingProxy(url)
    yield p
    p.close()
