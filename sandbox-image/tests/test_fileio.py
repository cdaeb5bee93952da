"""The workspace file program (replcast_repl/fileio.py) that the API runs with `docker exec`:
raw bytes both ways, atomic puts, and every path kept inside the workspace, symlinks
planted by sandbox code included.
"""

import json
import os
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
CANDIDATES = (os.path.join(HERE, "..", "replcast_repl", "fileio.py"), "/opt/replcast/replcast_repl/fileio.py")
PROGRAM = next((p for p in CANDIDATES if os.path.exists(p)), CANDIDATES[0])


def frames(data, chunk=65536, commit=True):
    out = b"".join(struct.pack(">I", len(data[i:i + chunk])) + data[i:i + chunk] for i in range(0, len(data), chunk))
    return out + (struct.pack(">I", 0) if commit else b"")


class FileIoTests(unittest.TestCase):
    def setUp(self):
        base = tempfile.mkdtemp(prefix="replcast-fileio-")
        self.addCleanup(subprocess.run, ["rm", "-rf", base])
        self.ws = os.path.join(base, "workspace")
        self.outside = os.path.join(base, "outside")
        os.mkdir(self.ws)
        os.mkdir(self.outside)
        with open(os.path.join(self.outside, "secret"), "wb") as f:
            f.write(b"host secret")

    def run_op(self, args, stdin=b""):
        """(JSON lines before the data, raw bytes after them) of one run."""
        env = dict(os.environ, REPLCAST_WORKSPACE=self.ws)
        proc = subprocess.run([sys.executable, "-I", "-S", PROGRAM, json.dumps(args)], input=stdin,
                              capture_output=True, env=env, timeout=30, cwd=self.ws)
        out = proc.stdout
        lines = []
        while out and (not lines or lines[-1].get("ready")):
            line, _, out = out.partition(b"\n")
            lines.append(json.loads(line))
        return lines, out

    def result(self, args, stdin=b""):
        return self.run_op(args, stdin)[0][-1]

    def assert_fails(self, args, code, stdin=b""):
        res = self.result(args, stdin)
        self.assertEqual((res.get("ok"), res.get("code")), (False, code), res)

    def put(self, path, data, **extra):
        return self.result(dict(op="put", path=path, **extra), frames(data))

    def get(self, path):
        lines, data = self.run_op({"op": "get", "path": path})
        self.assertTrue(lines[0]["ok"], lines)
        self.assertEqual(lines[0]["size"], len(data))
        return data

    def ws_path(self, *parts):
        return os.path.join(self.ws, *parts)

    def leftovers(self):
        return [n for _, _, names in os.walk(self.ws) for n in names if n.startswith(".replcast-upload-")]

    # -- put and get -------------------------------------------------------------------

    def test_round_trip_of_binary_bytes_with_created_and_replaced(self):
        data = os.urandom(300_000) + b"\0\r\n\xff"
        res = self.put("data/deep/blob.bin", data)
        self.assertEqual((res["ok"], res["created"], res["size"]), (True, True, len(data)))
        self.assertEqual(res["path"], "data/deep/blob.bin")
        self.assertEqual(self.get("data/deep/blob.bin"), data)
        self.assertEqual(stat.S_IMODE(os.stat(self.ws_path("data/deep/blob.bin")).st_mode), 0o644)
        res = self.put("./data//deep/blob.bin", b"short", mode=0o600)
        self.assertEqual((res["created"], res["size"]), (False, 5))
        self.assertEqual(self.get("data/deep/blob.bin"), b"short")
        self.assertEqual(stat.S_IMODE(os.stat(self.ws_path("data/deep/blob.bin")).st_mode), 0o600)
        self.assertEqual(self.put("empty", b"")["size"], 0)
        self.assertEqual(self.get("empty"), b"")

    def test_a_put_without_its_commit_frame_changes_nothing(self):
        self.put("keep.txt", b"original")
        self.assert_fails({"op": "put", "path": "keep.txt"}, "aborted", frames(b"partial new content", commit=False))
        self.assertEqual(self.get("keep.txt"), b"original")
        self.assertEqual(self.leftovers(), [])

    def test_a_put_past_its_size_bound_is_refused_and_leaves_nothing(self):
        self.assert_fails({"op": "put", "path": "big.bin", "max_bytes": 1000}, "too_large", frames(b"x" * 5000))
        self.assertFalse(os.path.exists(self.ws_path("big.bin")))
        self.assertEqual(self.leftovers(), [])

    def test_a_get_past_its_size_bound_is_refused_from_the_size_before_any_byte(self):
        with open(self.ws_path("sparse.bin"), "wb") as f:
            f.truncate(1 << 34)  # 16 GiB that take no room
        lines, data = self.run_op({"op": "get", "path": "sparse.bin", "max_bytes": 1 << 20})
        self.assertEqual([(line["ok"], line["code"], line["size"]) for line in lines], [(False, "too_large", 1 << 34)])
        self.assertEqual(data, b"")
        with open(self.ws_path("small.bin"), "wb") as f:
            f.write(b"x" * 100)
        lines, data = self.run_op({"op": "get", "path": "small.bin", "max_bytes": 100})
        self.assertEqual((lines[0]["ok"], data), (True, b"x" * 100), "a file of exactly the bound is sent")

    def test_kill_ends_a_stopped_program_by_its_tag_and_removes_its_upload(self):
        env = dict(os.environ, REPLCAST_WORKSPACE=self.ws)

        def start(tag):
            proc = subprocess.Popen([sys.executable, "-I", "-S", PROGRAM, json.dumps({"op": "put", "path": "d/x.bin", "tag": tag})],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=self.ws)
            self.addCleanup(lambda: (proc.kill(), proc.communicate()))
            return proc

        target, other = start("0abc"), start("0abd")
        for proc in (target, other):
            self.assertEqual(json.loads(proc.stdout.readline()), {"ready": True})
            proc.stdin.write(frames(b"partial", commit=False))
            proc.stdin.flush()
            os.kill(proc.pid, signal.SIGSTOP)
        self.assertEqual(len(self.leftovers()), 2)
        self.assertEqual(self.result({"op": "kill", "target": "0abc"}), {"ok": True, "killed": 1})
        self.assertEqual(target.wait(timeout=10), -signal.SIGKILL)
        self.assertIsNone(other.poll(), "a program with another tag is left alone")
        self.assertEqual([n.startswith(".replcast-upload-0abd-") for n in self.leftovers()], [True], "only the killed put's upload is removed")
        self.assertEqual(self.result({"op": "kill", "target": "0abc"}), {"ok": True, "killed": 0})
        self.assert_fails({"op": "kill", "target": ""}, "bad_request")

    def test_get_and_delete_of_missing_files(self):
        self.assert_fails({"op": "get", "path": "nope.txt"}, "not_found")
        self.assert_fails({"op": "get", "path": "nodir/nope.txt"}, "not_found")
        self.assert_fails({"op": "delete", "path": "nope.txt"}, "not_found")

    def test_folders(self):
        self.put("dir/a.txt", b"a")
        self.assert_fails({"op": "get", "path": "dir"}, "is_a_directory")
        self.assert_fails({"op": "get", "path": ""}, "is_a_directory")
        self.assert_fails({"op": "put", "path": "dir"}, "is_a_directory", frames(b"x"))
        self.assert_fails({"op": "delete", "path": "dir"}, "is_a_directory")
        self.assertTrue(self.result({"op": "delete", "path": "dir", "recursive": True})["ok"])
        self.assertFalse(os.path.exists(self.ws_path("dir")))
        self.assert_fails({"op": "delete", "path": "", "recursive": True}, "invalid_path")

    def test_a_file_where_a_folder_is_needed(self):
        self.put("f.txt", b"x")
        self.assert_fails({"op": "put", "path": "f.txt/inner"}, "invalid_path", frames(b"y"))
        self.assert_fails({"op": "get", "path": "f.txt/inner"}, "not_found")

    # -- paths that would leave the workspace ------------------------------------------

    def test_lexical_escapes(self):
        for path in ("..", "../x", "a/../../x", "a/..", "/etc/passwd", "a\0b", "x" * 256):
            for op in ("get", "put", "delete", "list"):
                with self.subTest(path=path, op=op):
                    self.assert_fails({"op": op, "path": path}, "invalid_path", frames(b"z"))
        self.assertEqual(os.listdir(self.ws), [])

    def test_symlinks_pointing_outside_are_refused_for_reading_and_writing(self):
        os.symlink(self.outside, self.ws_path("out"))
        os.symlink(os.path.join(self.outside, "secret"), self.ws_path("secret-link"))
        os.symlink(os.path.join(self.outside, "new-file"), self.ws_path("dangling"))
        for path in ("out/secret", "secret-link", "out"):
            with self.subTest(path=path):
                self.assert_fails({"op": "get", "path": path}, "invalid_path")
                self.assert_fails({"op": "list", "path": path}, "invalid_path")
        for path in ("out/new", "secret-link", "dangling", "out/sub/new"):
            with self.subTest(path=path):
                self.assert_fails({"op": "put", "path": path}, "invalid_path", frames(b"overwritten"))
        self.assertEqual(sorted(os.listdir(self.outside)), ["secret"])
        with open(os.path.join(self.outside, "secret"), "rb") as f:
            self.assertEqual(f.read(), b"host secret")
        # Deleting a link removes the link, never what it points at.
        self.assertTrue(self.result({"op": "delete", "path": "secret-link"})["ok"])
        self.assertTrue(self.result({"op": "delete", "path": "out", "recursive": True})["ok"])
        self.assertEqual(sorted(os.listdir(self.outside)), ["secret"])

    def test_symlinks_inside_the_workspace_are_followed(self):
        self.put("real/data.txt", b"inside")
        os.symlink("real/data.txt", self.ws_path("link.txt"))
        os.symlink("real", self.ws_path("dirlink"))
        self.assertEqual(self.get("link.txt"), b"inside")
        self.assertEqual(self.get("dirlink/data.txt"), b"inside")
        self.assertEqual(self.put("link.txt", b"through")["path"], "real/data.txt")
        self.assertTrue(os.path.islink(self.ws_path("link.txt")))
        self.assertEqual(self.get("real/data.txt"), b"through")

    def test_special_files_are_refused_without_blocking(self):
        os.mkfifo(self.ws_path("fifo"))
        self.assert_fails({"op": "get", "path": "fifo"}, "invalid_path")

    # -- listing -------------------------------------------------------------------------

    def test_listing(self):
        self.put("b.txt", b"bb")
        self.put("a/z.bin", b"z" * 10)
        self.put("a/sub/deep.txt", b"d")
        os.symlink("b.txt", self.ws_path("a/link"))
        with open(self.ws_path("a/.replcast-upload-0123"), "wb"):
            pass
        entries = self.result({"op": "list", "path": "", "recursive": True})["entries"]
        self.assertEqual([(e["path"], e["type"], e["size"]) for e in entries],
                         [("a", "dir", 0), ("a/sub", "dir", 0), ("a/sub/deep.txt", "file", 1),
                          ("a/z.bin", "file", 10), ("b.txt", "file", 2)])
        self.assertTrue(all(isinstance(e["mtime"], float) for e in entries))
        top = self.result({"op": "list", "path": "a", "recursive": False})
        self.assertEqual([e["path"] for e in top["entries"]], ["a/sub", "a/z.bin"])
        self.assertFalse(top["truncated"])
        one = self.result({"op": "list", "path": "a/z.bin"})["entries"]
        self.assertEqual([(e["path"], e["size"]) for e in one], [("a/z.bin", 10)])
        self.assert_fails({"op": "list", "path": "missing"}, "not_found")


if __name__ == "__main__":
    unittest.main()
