"""Workspace file transfer: file_put/file_get/file_list.

Paths are relative to the workspace root; absolute paths, `..` escapes and
symlinks that resolve outside the root are refused with `bad_path`.
"""

import base64
import binascii
import errno
import os
import stat

from .protocol import ReplyError

DEFAULT_GET_BYTES = 1024 * 1024
MAX_LIST_ENTRIES = 10000


def _os_error(exc, path):
    if exc.errno == errno.ENOENT:
        return ReplyError("not_found", "%s: no such file or directory" % path)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return ReplyError("no_space", "%s: the workspace is full" % path)
    if exc.errno == errno.EISDIR:
        return ReplyError("is_directory", "%s: is a directory" % path)
    if exc.errno == errno.ENOTDIR:
        return ReplyError("not_found", "%s: a parent is not a directory" % path)
    return ReplyError("io_error", "%s: %s" % (path, exc.strerror or exc))


def _int_field(frame, name, default):
    value = frame.get(name, default)
    if value is None:
        value = default
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ReplyError("bad_request", "%s must be a non-negative integer" % name)
    return value


class Workspace:
    def __init__(self, root, max_chunk_bytes):
        self.root = os.path.realpath(root)
        self.max_chunk_bytes = max_chunk_bytes  # one file_get reply (limits.file_chunk_bytes)

    def resolve(self, path, allow_root=False):
        """Absolute real path for a workspace-relative path, or ReplyError(bad_path)."""
        if path is None and allow_root:
            path = ""
        if not isinstance(path, str) or "\0" in path:
            raise ReplyError("bad_path", "path must be a string without NUL bytes")
        if path.startswith("/") or path.startswith("\\"):
            raise ReplyError("bad_path", "%s: absolute paths are not allowed; use a path relative to the workspace" % path)
        joined = os.path.normpath(os.path.join(self.root, path))
        real = os.path.realpath(joined)
        for candidate in (joined, real):
            if candidate != self.root and not candidate.startswith(self.root + os.sep):
                raise ReplyError("bad_path", "%s: escapes the workspace" % path)
        if real == self.root and not allow_root:
            raise ReplyError("bad_path", "%s: names the workspace itself" % (path or "''"))
        return real

    def rel(self, real):
        return os.path.relpath(real, self.root)

    # -- operations ------------------------------------------------------------

    def put(self, frame):
        path = frame.get("path")
        target = self.resolve(path)
        offset = _int_field(frame, "offset", 0)
        data = frame.get("data", "")
        if not isinstance(data, str):
            raise ReplyError("bad_request", "data must be a base64 string")
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise ReplyError("bad_request", "data is not valid base64") from None
        try:
            if offset == 0:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
            else:
                fd = os.open(target, os.O_WRONLY | os.O_NOFOLLOW)
            try:
                size = os.fstat(fd).st_size
                if offset > size:
                    raise ReplyError("bad_request", "offset %d is past the end of %s (%d bytes)" % (offset, path, size))
                view = memoryview(raw)
                pos = offset
                while view:
                    n = os.pwrite(fd, view, pos)
                    view = view[n:]
                    pos += n
                size = os.fstat(fd).st_size
            finally:
                os.close(fd)
        except OSError as exc:
            raise _os_error(exc, path) from None
        return {"size": size}

    def get(self, frame):
        path = frame.get("path")
        target = self.resolve(path)
        offset = _int_field(frame, "offset", 0)
        length = min(_int_field(frame, "length", DEFAULT_GET_BYTES), self.max_chunk_bytes)
        try:
            fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW)
            try:
                st = os.fstat(fd)
                if stat.S_ISDIR(st.st_mode):
                    raise ReplyError("is_directory", "%s: is a directory" % path)
                data = os.pread(fd, length, offset) if length else b""
            finally:
                os.close(fd)
        except OSError as exc:
            raise _os_error(exc, path) from None
        size = st.st_size
        return {"data": base64.b64encode(data).decode("ascii"),
                "eof": offset + len(data) >= size, "size": size}

    def list(self, frame):
        path = frame.get("path")
        if path in (None, "", "."):
            path = None
        target = self.resolve(path, allow_root=True)
        entries = []
        truncated = False
        try:
            st = os.lstat(target)
        except OSError as exc:
            raise _os_error(exc, path or ".") from None
        if not stat.S_ISDIR(st.st_mode):
            return {"entries": [self._entry(target, st)], "truncated": False}
        for dirpath, dirnames, filenames in os.walk(target, onerror=None, followlinks=False):
            dirnames.sort()
            for name in sorted(dirnames) + sorted(filenames):
                full = os.path.join(dirpath, name)
                try:
                    est = os.lstat(full)
                except OSError:
                    continue
                if not (stat.S_ISDIR(est.st_mode) or stat.S_ISREG(est.st_mode)):
                    continue  # symlinks, fifos, sockets are not listed
                if len(entries) >= MAX_LIST_ENTRIES:
                    truncated = True
                    break
                entries.append(self._entry(full, est))
            if truncated:
                break
        return {"entries": entries, "truncated": truncated}

    def _entry(self, full, st):
        is_dir = stat.S_ISDIR(st.st_mode)
        return {"path": self.rel(full), "size": 0 if is_dir else st.st_size,
                "type": "dir" if is_dir else "file", "mtime": st.st_mtime}
