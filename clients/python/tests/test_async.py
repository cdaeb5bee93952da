"""The AsyncClient: the same shape as Client with await, async for and async with (run by asyncio.run,
so no plugin is needed)."""
from __future__ import annotations

import asyncio
import io
import time
from typing import AsyncIterator, List

import pytest

from cutting_proxy import CuttingProxy
from replcast import AsyncClient, Event, NotFoundError, QueueFullError


def test_async_sessions_runs_streams_files_and_errors(url: str, api_key: str) -> None:
    async def main() -> None:
        async with AsyncClient(url, api_key) as client:
            async with await client.sessions.create(idle_timeout_s=120) as s:
                assert (await s.run("x = 20")).status == "ok"
                assert (await s.run("x + 1")).text == "21"
                arrived = {}
                async for event in s.stream('import time\nprint("a", flush=True)\ntime.sleep(1)\nprint("b")'):
                    if event.type == "stdout":
                        arrived[event.text.strip()] = time.monotonic()
                assert arrived["b"] - arrived["a"] >= 0.8, "live, not at the end"
                started = await s.stream("print(x)")  # awaited: started at once, its id known
                assert started.execution_id.startswith("exe_")
                assert [e.text async for e in started if e.type == "stdout"] == ["20\n"]

                data = bytes(range(256)) * 300

                async def pieces() -> AsyncIterator[bytes]:  # an async iterable body
                    for i in range(0, len(data), 1000):
                        yield data[i:i + 1000]

                assert (await s.files.write("a.bin", pieces()))["size"] == len(data)
                assert (await s.files.write("b.bin", io.BytesIO(data)))["size"] == len(data)
                assert await s.files.read("a.bin") == data == await s.files.read("b.bin")
                assert b"".join([c async for c in await s.files.iter_bytes("a.bin")]) == data
                assert [e["path"] for e in await s.files.list()] == ["a.bin", "b.bin"]
                await s.files.remove("a.bin")
                with pytest.raises(NotFoundError):
                    await s.files.read("a.bin")
                assert (await s.refresh()).status == "ready"
                assert s.id in [x.id for x in await client.sessions.list()]
                sid = s.id
            with pytest.raises(NotFoundError):
                await client.sessions.get(sid)
            once = await client.execute("print(open('in.txt').read())", files={"in.txt": "async one-shot"})
            assert once.stdout == "async one-shot\n"

    asyncio.run(main())


def test_async_concurrent_calls_interrupt_and_queue_full(url: str, api_key: str) -> None:
    async def main() -> None:
        async with AsyncClient(url, api_key) as client, await client.sessions.create() as s:
            stream = await s.stream("import time\nprint('go', flush=True)\ntime.sleep(60)")
            waiting = await s.stream("'queued'")
            with pytest.raises(QueueFullError):
                await s.stream("1")
            events: List[Event] = []
            async for event in stream:
                events.append(event)
                if event.type == "stdout":
                    await s.interrupt()
            assert stream.status == "interrupted" and events[-1].type == "done"
            results = [e.mime async for e in waiting if e.type == "result"]
            assert results == [{"text/plain": "'queued'"}]
            a, b = await asyncio.gather(s.files.write("p.txt", "p"), s.files.write("q.txt", "q"))
            assert {a["path"], b["path"]} == {"p.txt", "q.txt"}

    asyncio.run(main())


def test_an_async_stream_cut_twice_delivers_every_line_once(api_key: str, proxy: CuttingProxy) -> None:
    async def main() -> None:
        async with AsyncClient(proxy.url, api_key, reconnect_delay_s=0.05) as client, await client.sessions.create() as s:
            code = 'import time\nfor i in range(12):\n    print(f"line {i}", flush=True)\n    time.sleep(0.1)'
            cut_at = ["line 3\n", "line 8\n"]
            printed = ""
            async with s.stream(code) as stream:
                async for event in stream:
                    printed += event.text if event.type == "stdout" else ""
                    if cut_at and cut_at[0] in printed:
                        cut_at.pop(0)
                        assert proxy.cut() > 0
            assert printed == "".join(f"line {i}\n" for i in range(12))
            assert stream.reconnects == 2 and stream.status == "ok"

    asyncio.run(main())
