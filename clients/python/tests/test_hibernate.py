"""Hibernation, sync and async, on the server's checkpointing engine with runsc sessions: a variable
and a file set before hibernate() are there after wake() and after a run that wakes the session by
itself; busy, runc and another tenant's session raise their error classes."""
from __future__ import annotations

import asyncio
import os

import pytest

from replcast import AsyncClient, Client, NotFoundError, NotSupportedError, SessionBusyError


def test_hibernate_wake_and_wake_on_use_keep_the_state(client: Client) -> None:
    with client.sessions.create(runtime="runsc", idle_action="hibernate", hibernated_ttl_s=600) as s:
        assert (s.data["idle_action"], s.data["hibernated_ttl_s"]) == ("hibernate", 600)
        assert s.run("x = 41\nopen('/workspace/f.txt', 'w').write('kept')").status == "ok"

        assert s.hibernate() is s
        assert s.status == "hibernated" and s.data.get("hibernated_at")
        first = s.data.get("hibernated_at")
        assert client.sessions.get(s.id).status == "hibernated", "reading it does not wake it"
        assert s.hibernate().data.get("hibernated_at") == first, "hibernating it again changes nothing"

        assert s.wake().status == "ready" and "hibernated_at" not in s.data
        assert s.run("x += 1\nprint(x, open('/workspace/f.txt').read())").stdout == "42 kept\n"

        s.hibernate()
        assert s.files.read_text("f.txt") == "kept", "a file call wakes it"
        assert s.refresh().status == "ready"
        s.hibernate()
        assert s.run("x += 1\nprint(x)").stdout == "43\n", "a run wakes it, the variable kept"


def test_hibernate_refusals_raise_their_classes(client: Client) -> None:
    with client.sessions.create(runtime="runsc") as busy, client.sessions.create(runtime="runc") as runc:
        stream = busy.stream('import time\nprint("started", flush=True)\ntime.sleep(60)')
        with stream:
            next(e for e in stream if e.type == "stdout")
            with pytest.raises(SessionBusyError) as refused:
                busy.hibernate()
            assert refused.value.status == 409
            busy.interrupt()
        with pytest.raises(NotSupportedError) as not_supported:
            runc.hibernate()
        assert not_supported.value.code == "not_supported" and not_supported.value.detail
        assert runc.refresh().status == "ready", "the runc session runs on"


def test_another_tenants_session_is_not_found(client: Client, url: str) -> None:
    other_key = os.environ.get("REPLCAST_QUOTA_KEY")
    assert other_key, "REPLCAST_QUOTA_KEY names a second tenant"
    with client.sessions.create(runtime="runsc") as s, Client(url, other_key) as other:
        for call in ("hibernate", "wake"):
            with pytest.raises(NotFoundError) as missing:
                other.request(call, id=s.id)
            assert missing.value.code == "session_not_found"


def test_async_hibernate_and_wake_keep_the_state(url: str, api_key: str) -> None:
    async def main() -> None:
        async with AsyncClient(url, api_key) as client:
            async with await client.sessions.create(runtime="runsc") as s:
                assert (await s.run("notes = ['before']")).status == "ok"
                assert (await s.hibernate()).status == "hibernated"
                assert (await client.sessions.get(s.id)).status == "hibernated"
                assert (await s.wake()).status == "ready"
                assert (await s.run("notes.append('after wake')\nprint(notes)")).stdout == "['before', 'after wake']\n"
                await s.hibernate()
                assert (await s.run("print(len(notes))")).stdout == "2\n", "a run wakes it"

    asyncio.run(main())
