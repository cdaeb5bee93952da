"""Live streams: output arrives as it is printed, a stream cut twice by a proxy still delivers every
line exactly once (resumed with Last-Event-ID), an execution can be followed again from any event,
and another thread can interrupt a running one."""
from __future__ import annotations

import socket
import threading
import time
from typing import Dict, List

from cutting_proxy import CuttingProxy
from replcast import Client, Event, Session

LINES = 20
SLOW_LINES = f'import time\nfor i in range({LINES}):\n    print(f"line {{i}}", flush=True)\n    time.sleep(0.1)\n"end"'


def id_key(event_id: str) -> tuple[int, int]:
    ms, seq = event_id.split("-")
    return int(ms), int(seq)


def test_a_sleep_between_two_prints_reaches_the_client_as_a_gap(session: Session) -> None:
    arrived: Dict[str, float] = {}
    stream = session.stream('import time\nprint("a", flush=True)\ntime.sleep(1.5)\nprint("b", flush=True)')
    for event in stream:
        if event.type == "stdout":
            arrived.setdefault(event.text.strip(), time.monotonic())
        if event.type == "done":
            arrived["done"] = time.monotonic()
    assert stream.status == "ok"
    assert arrived["b"] - arrived["a"] >= 1.3, "b came 1.5 s after a, as printed"
    assert arrived["done"] - arrived["a"] >= 1.3, "a came while the code still ran, not with the end"


def test_a_stream_cut_twice_mid_way_delivers_every_line_exactly_once(api_key: str, session: Session, proxy: CuttingProxy) -> None:
    with Client(proxy.url, api_key, reconnect_delay_s=0.05) as via_proxy:
        s = via_proxy.sessions.get(session.id)
        stream = s.stream(SLOW_LINES)
        events: List[Event] = []
        cut_at = ["line 4\n", "line 11\n"]
        printed = ""
        before = proxy.connections
        for event in stream:
            events.append(event)
            printed += event.text if event.type == "stdout" else ""
            # Later lines do not exist yet (the code sleeps between them), so each cut lands mid-execution.
            if cut_at and cut_at[0] in printed:
                cut_at.pop(0)
                assert proxy.cut() > 0
    assert "".join(e.text for e in events if e.type == "stdout") == "".join(f"line {i}\n" for i in range(LINES)), "no line lost or repeated"
    assert stream.reconnects == 2, "one reconnection per cut"
    assert proxy.connections - before >= 2, "each over a new connection"
    ids = [id_key(e.id) for e in events]
    assert ids == sorted(set(ids)), "ids strictly increase: no event twice"
    assert events[-2].mime == {"text/plain": "'end'"} and events[-1].type == "done"
    assert stream.status == "ok" and stream.last_event_id == events[-1].id


def test_an_execution_is_followed_again_from_any_event(session: Session) -> None:
    ex = session.run('for i in range(3):\n    print(i, flush=True)\n"x"')
    ids = [e.id for e in ex.events]
    mid = ids[1]
    tail = session.events(ex.id, last_event_id=mid)
    assert [e.id for e in tail] == ids[2:]
    assert tail.status == "ok"
    assert list(session.events(ex.id, last_event_id=ids[-1])) == [], "after the last event of an ended execution: nothing (204)"
    assert [e.id for e in session.events(ex.id)] == ids, "from the start"


def test_another_thread_interrupts_a_running_execution(session: Session) -> None:
    started = threading.Event()
    seen: List[Event] = []
    status: List[object] = []

    def run() -> None:
        stream = session.stream("import time\nprint('started', flush=True)\nwhile True:\n    time.sleep(0.05)")
        for event in stream:
            seen.append(event)
            if event.type == "stdout":
                started.set()
        status.append(stream.status)

    worker = threading.Thread(target=run)
    worker.start()
    assert started.wait(30), "the code started"
    session.interrupt()  # this thread, the same client
    worker.join(30)
    assert not worker.is_alive()
    assert status == ["interrupted"]
    assert [e.data.get("ename") for e in seen if e.type == "error"] == ["KeyboardInterrupt"]
    assert session.run("1 + 1").text == "2", "the session carries on"


def test_a_timeout_ends_the_execution_as_timeout(session: Session) -> None:
    ex = session.run("import time\ntime.sleep(30)", timeout_s=1)
    assert ex.status == "timeout"
    assert ex.duration_ms is not None and ex.duration_ms < 15000


def test_calls_share_one_kept_alive_connection_without_a_nagle_stall(api_key: str, session: Session, proxy: CuttingProxy) -> None:
    with Client(proxy.url, api_key) as via_proxy:
        s = via_proxy.sessions.get(session.id)
        for i in range(15):
            assert s.run(f"{i} + 1").text == str(i + 1)
        s.files.write("kept.txt", b"alive")
        assert s.files.read("kept.txt") == b"alive"
        # Without TCP_NODELAY a request's body waits for the ACK of its headers, which Linux delays 40 ms
        # on a kept-alive connection: the client's own connections have it set.
        seen = via_proxy._http.get(f"{proxy.url}/healthz")
        sock = seen.extensions["network_stream"].get_extra_info("socket")
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0, "TCP_NODELAY is set"
    assert proxy.connections == 1, "every call, streams included, went over the same connection"
