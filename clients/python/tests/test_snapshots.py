"""Snapshots and fork, sync and async, with runsc sessions: a session started from a snapshot has the
state taken, fork copies start from the state then and are independent, a deleted snapshot raises
SnapshotNotFoundError."""
from __future__ import annotations

import asyncio

import pytest

from replcast import AsyncClient, Client, SnapshotNotFoundError


def test_snapshot_a_session_from_it_and_fork_copies_are_independent(client: Client) -> None:
    with client.sessions.create(runtime="runsc") as s:
        s.run("v = 'taken'\nopen('/workspace/f.txt', 'w').write('file')")
        snap = s.snapshot(name="py")
        assert snap["id"].startswith("snp_") and snap["session_id"] == s.id and snap["name"] == "py" and snap["bytes"] > 0
        s.run("v = 'changed'")
        with client.sessions.create(snapshot_id=snap["id"]) as restored:
            assert restored.id != s.id
            assert restored.run("print(v, open('/workspace/f.txt').read())").stdout == "taken file\n"
        assert client.snapshots.get(snap["id"])["id"] == snap["id"]
        assert snap["id"] in [x["id"] for x in client.snapshots.list()]

        copies = s.fork(2)
        try:
            assert len(copies) == 2 and all(c.id != s.id for c in copies)
            copies[0].run("v = 'copy 0'")
            assert [x.run("print(v)").stdout for x in (s, copies[0], copies[1])] == ["changed\n", "copy 0\n", "changed\n"]
        finally:
            for c in copies:
                c.delete()

        client.snapshots.delete(snap["id"])
        with pytest.raises(SnapshotNotFoundError):
            client.snapshots.get(snap["id"])


def test_async_snapshot_and_fork(url: str, api_key: str) -> None:
    async def main() -> None:
        async with AsyncClient(url, api_key) as client:
            async with await client.sessions.create(runtime="runsc") as s:
                await s.run("n = 5")
                snap = await s.snapshot()
                async with await client.sessions.create(snapshot_id=snap["id"]) as restored:
                    assert (await restored.run("print(n * 2)")).stdout == "10\n"
                [copy] = await s.fork()
                async with copy:
                    assert (await copy.run("print(n)")).stdout == "5\n"
                await client.snapshots.delete(snap["id"])
                assert snap["id"] not in [x["id"] for x in await client.snapshots.list()]

    asyncio.run(main())
