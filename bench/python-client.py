# The Python client's side of bench/python-client.ts: print(1) round trips, timed from the call to the
# execution's `done`, through the replcast package (session.run, session.stream) or through raw httpx
# (the same SSE request read until done, or the JSON reply). One way per process.
# Usage: /usr/bin/python3 bench/python-client.py WAY URL KEY SESSION ROUNDS WARMUP  → {"samples_ms": [...]}
# (bench/python-client.ts puts clients/python/src on PYTHONPATH; Debian's python3-httpx underneath.)
import json
import sys
import time

import httpx

from replcast import Client

CODE = "print(1)"


def replcast_run(session):
    ex = session.run(CODE)
    assert ex.stdout == "1\n", ex


def replcast_stream(session):
    out = "".join(e.text for e in session.stream(CODE) if e.type == "stdout")
    assert out == "1\n", out


def httpx_sse(raw, path):
    # The client's own request, with no client around it: read the stream until the done event.
    with raw.stream("POST", path, json={"code": CODE}, headers={"accept": "text/event-stream"}) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if line.startswith("event: done"):
                return
    raise RuntimeError("the stream ended without done")


def httpx_json(raw, path):
    r = raw.post(path, json={"code": CODE})
    r.raise_for_status()
    assert r.json()["status"] == "ok"


def main():
    way, url, key, sid = sys.argv[1:5]
    rounds, warmup = int(sys.argv[5]), int(sys.argv[6])
    path = f"/v1/sessions/{sid}/executions"
    with Client(url, key) as client, httpx.Client(base_url=url, headers={"authorization": f"Bearer {key}"}, timeout=60) as raw:
        session = client.sessions.get(sid)
        calls = {
            "replcast-run": lambda: replcast_run(session),
            "replcast-stream": lambda: replcast_stream(session),
            "httpx-sse": lambda: httpx_sse(raw, path),
            "httpx-json": lambda: httpx_json(raw, path),
        }
        call = calls[way]
        samples = []
        for i in range(rounds + warmup):
            t0 = time.perf_counter()
            call()
            if i >= warmup:
                samples.append((time.perf_counter() - t0) * 1000)
    print(json.dumps({"samples_ms": samples}))


if __name__ == "__main__":
    main()
