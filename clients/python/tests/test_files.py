"""Workspace files both ways: every byte value intact through each kind of body, listings, removal,
and a 200 MB file up and down in bounded memory."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict

from replcast import FileData, NotFoundError, Session

ALL_BYTES = bytes(range(256)) * 1024 + bytes(reversed(range(256)))


def test_all_256_byte_values_arrive_exactly_through_every_kind_of_body(session: Session, tmp_path: Path) -> None:
    local = tmp_path / "local.bin"
    local.write_bytes(ALL_BYTES)
    with open(local, "rb") as f:
        bodies: Dict[str, FileData] = {"bytes.bin": ALL_BYTES, "file.bin": f, "iter.bin": iter([ALL_BYTES[:1000], ALL_BYTES[1000:]])}
        for name, body in bodies.items():
            entry = session.files.write(f"bytes/{name}", body)
            assert (entry["path"], entry["type"], entry["size"]) == (f"bytes/{name}", "file", len(ALL_BYTES))
    for name in bodies:
        assert session.files.read(f"bytes/{name}") == ALL_BYTES, name
    out = tmp_path / "out.bin"
    assert session.files.download("bytes/file.bin", out) == len(ALL_BYTES)
    assert out.read_bytes() == ALL_BYTES
    assert b"".join(session.files.iter_bytes("bytes/iter.bin")) == ALL_BYTES
    assert session.run("open('bytes/bytes.bin', 'rb').read() == bytes(range(256)) * 1024 + bytes(reversed(range(256)))").text == "True"
    session.files.write("text/\u00e9t\u00e9 #1.txt", "\u00e7a va\n")
    assert session.files.read_text("text/\u00e9t\u00e9 #1.txt") == "\u00e7a va\n", "names and text are UTF-8"


def test_listing_mode_and_removal(session: Session) -> None:
    session.files.write("tree/a.txt", b"a")
    session.files.write("tree/sub/run.sh", b"#!/bin/sh\necho ran\n", mode=0o755)
    listing = session.files.list("tree", recursive=True)
    assert [(e["path"], e["type"]) for e in listing] == [("tree/a.txt", "file"), ("tree/sub", "dir"), ("tree/sub/run.sh", "file")]
    assert listing.truncated is False
    assert [e["path"] for e in session.files.list("tree")] == ["tree/a.txt", "tree/sub"]
    assert session.run("import os\noct(os.stat('tree/sub/run.sh').st_mode & 0o777)").text == "'0o755'"
    session.files.remove("tree/a.txt")
    session.files.remove("tree", recursive=True)
    try:
        session.files.read("tree/sub/run.sh")
        raise AssertionError("the file outlived its folder")
    except NotFoundError as err:
        assert err.code == "file_not_found"


TRANSFER = r"""
import hashlib, io, json, resource, sys
from replcast import Client

SIZE = int(sys.argv[1])
PATTERN = bytes(range(256)) * 4096


class Pattern(io.RawIOBase):
    # SIZE bytes of 0, 1, ... 255, 0, 1, ... made as they are read: nothing holds the whole file.
    def __init__(self):
        self.left = SIZE
    def readable(self):
        return True
    def readinto(self, buf):
        start = (SIZE - self.left) % 256
        n = min(len(buf), self.left, len(PATTERN) - 256)
        buf[:n] = PATTERN[start:start + n]
        self.left -= n
        return n


class Digest:
    def __init__(self):
        self.hash = hashlib.sha256()
    def write(self, b):
        self.hash.update(b)
        return len(b)


def expected():
    h, left = hashlib.sha256(), SIZE
    while left:  # pieces of a multiple of 256 bytes, each starting at a 0
        h.update(PATTERN[:min(left, len(PATTERN))])
        left -= min(left, len(PATTERN))
    return h.hexdigest()


peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
with Client() as client, client.sessions.create(limits={"workspace_mb": 256, "memory_mb": 512}) as s:
    s.files.write("warm.bin", b"x" * 1000)
    s.files.read("warm.bin")
    before = peak()
    entry = s.files.write("big.bin", Pattern())
    sink = Digest()
    n = s.files.download("big.bin", sink)
    print(json.dumps({"size": entry["size"], "downloaded": n, "same": sink.hash.hexdigest() == expected(), "before": before, "after": peak()}))
"""


def test_a_200_mb_file_goes_up_and_down_in_bounded_memory(url: str, api_key: str) -> None:
    size = 200 * 1000 * 1000
    # A process of its own, so that its peak memory is this transfer's alone.
    env = {**os.environ, "REPLCAST_URL": url, "REPLCAST_API_KEY": api_key}
    out = subprocess.run([sys.executable, "-c", TRANSFER, str(size)], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert (r["size"], r["downloaded"], r["same"]) == (size, size, True)
    growth_mb = (r["after"] - r["before"]) / 1e6
    assert growth_mb < 30, f"the process grew {growth_mb:.1f} MB moving {size / 1e6:.0f} MB each way"
