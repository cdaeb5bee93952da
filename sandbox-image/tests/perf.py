"""Measures the REPL's channel alone (issue 11): writes per execution, the gap a sleep leaves
between two prints, bulk stdout throughput and the REPL's idle memory.

    python3 perf.py writes [-n 200]       # write() calls per print(1) execution (SEQPACKET stdout)
    python3 perf.py gap [--sleep 2]       # "a" -> "b" gap of print('a'); time.sleep(s); print('b')
    python3 perf.py bulk [--mb 50]        # MB/s of sys.stdout.write(64 KiB) and print() loops
    python3 perf.py idle-memory [--code C] # docker stats of an idle REPL (after C) vs idle python3

The REPL runs as a subprocess of this script (`python3 -m replcast_repl`, from the source tree
beside this file or the image's PYTHONPATH); `--docker` runs it with `docker run -i --rm` of
$SANDBOX_IMAGE instead (gap, bulk). Prints one JSON object.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
IMAGE = os.environ.get("SANDBOX_IMAGE", "replcast-sandbox:latest")
DONE = b'"type":"done"'


def repl_argv(docker):
    if docker:
        return ["docker", "run", "-i", "--rm", "--network", "none", "--env", "REPLCAST_MAX_STREAM_BYTES=200000000", IMAGE]
    return [sys.executable, "-m", "replcast_repl"]


def repl_env():
    env = dict(os.environ)
    parent = os.path.dirname(HERE)
    if os.path.isdir(os.path.join(parent, "replcast_repl")):
        env["PYTHONPATH"] = parent + os.pathsep + env.get("PYTHONPATH", "")
    env["REPLCAST_MAX_STREAM_BYTES"] = "200000000"
    return env


def frame(type_, **fields):
    return (json.dumps(dict(v=1, type=type_, **fields)) + "\n").encode()


# -- writes per execution ------------------------------------------------------------------


def writes(n):
    """Each recv() of a SEQPACKET socket is exactly one write() of the REPL."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    theirs.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    proc = subprocess.Popen(repl_argv(False), stdin=subprocess.PIPE, stdout=theirs, env=repl_env())
    theirs.close()
    ours.recv(1 << 20)  # ready
    counts, frames_per_write = [], []
    for i in range(n):
        proc.stdin.write(frame("execute", id="e%d" % i, code="print(1)"))
        proc.stdin.flush()
        got = 0
        while True:
            data = ours.recv(4 << 20)
            got += 1
            frames_per_write.append(data.count(b"\n"))
            if DONE in data:
                break
        counts.append(got)
    proc.stdin.close()
    proc.wait()
    return {"executions": n, "writes_per_execution_mean": statistics.mean(counts),
            "writes_per_execution_max": max(counts), "histogram": {str(k): counts.count(k) for k in sorted(set(counts))}}


# -- a -> b gap --------------------------------------------------------------------------------


class Reader:
    """Reads the REPL's stdout, keeping (arrival time, frame) for every frame."""

    def __init__(self, proc):
        self.frames = []
        self.cond = threading.Condition()
        threading.Thread(target=self._run, args=(proc.stdout,), daemon=True).start()

    def _run(self, out):
        for line in iter(out.readline, b""):
            now = time.monotonic()
            with self.cond:
                self.frames.append((now, json.loads(line)))
                self.cond.notify_all()

    def wait(self, pred):
        with self.cond:
            while True:
                for t, f in self.frames:
                    if pred(f):
                        return t, f
                self.cond.wait(60)


def gap(sleep_s, runs, docker):
    proc = subprocess.Popen(repl_argv(docker), stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=repl_env())
    reader = Reader(proc)
    reader.wait(lambda f: f["type"] == "ready")
    gaps, first = [], []
    for i in range(runs):
        time.sleep(0.05)  # idle between executions, as between requests
        eid = "g%d" % i
        code = "import time\nprint(time.monotonic())\ntime.sleep(%r)\nprint(time.monotonic())" % sleep_s
        proc.stdin.write(frame("execute", id=eid, code=code))
        proc.stdin.flush()
        reader.wait(lambda f: f["type"] == "done" and f.get("exec_id") == eid)
        timed = [(t, f) for t, f in reader.frames if f.get("exec_id") == eid and f["type"] == "stream"]
        gaps.append((timed[-1][0] - timed[0][0]) * 1000)
        if not docker:  # the same monotonic clock on both sides
            first.append([round((t - float(f["text"].split()[0])) * 1000, 3) for t, f in timed])
    proc.stdin.close()
    proc.wait()
    out = {"sleep_ms": sleep_s * 1000, "gaps_ms": [round(g, 2) for g in gaps]}
    if first:
        out["print_to_arrival_ms"] = first  # [a, b] per run
    return out


# -- bulk --------------------------------------------------------------------------------------

BULK_CODES = {
    "write_64k": "import sys\nchunk = 'x' * 65535 + '\\n'\nfor _ in range(%d):\n    sys.stdout.write(chunk)",
    "print_lines": "for i in range(%d):\n    print('%s')",
}


def bulk(mb, docker):
    proc = subprocess.Popen(repl_argv(docker), stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=repl_env())
    fd = proc.stdout.fileno()
    buf = b""
    while b"\n" not in buf:
        buf += os.read(fd, 1 << 16)
    results = {}
    total = mb * 1024 * 1024
    line = "y" * 99
    cases = {"write_64k": BULK_CODES["write_64k"] % (total // 65536),
             "print_lines": BULK_CODES["print_lines"] % (total // 100, line)}
    for name, code in cases.items():
        started = time.monotonic()
        proc.stdin.write(frame("execute", id=name, code=code, max_stream_bytes=total * 2))
        proc.stdin.flush()
        got, tail = 0, b""
        while True:
            data = os.read(fd, 1 << 20)
            if not data:
                raise SystemExit("the REPL closed its stdout")
            got += len(data)
            if DONE in tail + data:
                break
            tail = data[-len(DONE):]
        seconds = time.monotonic() - started
        results[name] = {"payload_mb": round(total / 1e6, 1), "wire_mb": round(got / 1e6, 1),
                         "seconds": round(seconds, 3), "mb_per_s": round(total / 1e6 / seconds, 1)}
    proc.stdin.close()
    proc.wait()
    return results


# -- idle memory -------------------------------------------------------------------------------


def _usage(cid):
    """docker stats' figure for cgroup v1/v2: usage less inactive file pages."""
    raw = subprocess.run(["docker", "stats", "--no-stream", "--format", "{{.MemUsage}}", cid],
                         capture_output=True, text=True, check=True).stdout.split("/")[0].strip()
    unit = raw.lstrip("0123456789.")
    return float(raw[:len(raw) - len(unit)]) * {"KiB": 1 / 1024, "MiB": 1, "GiB": 1024, "B": 1 / (1 << 20)}[unit]


def idle_memory(settle_s, samples, code=None):
    """docker stats of an idle REPL (after `ready`, or after running `code`) and of an idle python3."""
    runs = {"repl": ["python3", "-m", "replcast_repl"], "python_sleep": ["python3", "-c", "import time; time.sleep(1e9)"]}
    out = {}
    for name, cmd in runs.items():
        values = []
        for i in range(samples):
            cname = "replcast-perf-%d-%s-%d" % (os.getpid(), name, i)
            proc = subprocess.Popen(["docker", "run", "-i", "--rm", "--name", cname, "--network", "none", "--read-only",
                                     "--tmpfs", "/tmp", "--tmpfs", "/workspace:uid=1000,gid=1000", "--init", IMAGE, *cmd],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            try:
                if name == "repl":
                    reader = Reader(proc)
                    reader.wait(lambda f: f["type"] == "ready")
                    if code is not None:
                        proc.stdin.write(frame("execute", id="m", code=code))
                        proc.stdin.flush()
                        reader.wait(lambda f: f["type"] == "done")
                else:
                    time.sleep(1)  # python3 has started
                time.sleep(settle_s)  # measuring idle memory: the point is to let it sit
                values.append(_usage(cname))
            finally:
                subprocess.run(["docker", "rm", "-f", cname], capture_output=True)
                proc.wait()
        out[name + "_mib"] = [round(v, 2) for v in values]
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["writes", "gap", "bulk", "idle-memory"])
    parser.add_argument("-n", type=int, default=200)
    parser.add_argument("--sleep", type=float, default=2.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--mb", type=int, default=50)
    parser.add_argument("--docker", action="store_true")
    parser.add_argument("--code", help="idle-memory: run this first (e.g. 'print(1)')")
    args = parser.parse_args()
    if args.what == "writes":
        result = writes(args.n)
    elif args.what == "gap":
        result = gap(args.sleep, args.runs, args.docker)
    elif args.what == "bulk":
        result = bulk(args.mb, args.docker)
    else:
        result = idle_memory(args.sleep, args.runs, args.code)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
