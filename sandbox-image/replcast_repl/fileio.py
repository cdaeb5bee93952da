"""Workspace files for the API, one operation per process, run by `docker exec` as the
sandbox user (never through the REPL, so a busy or wedged REPL does not matter):

    python3 -I -S /opt/replcast/replcast_repl/fileio.py '{"op": "get", "path": "data/x.csv"}'

stdout: JSON header lines, then (get) the file's raw bytes. put reads its data from stdin in
frames (4-byte big-endian length, then that many bytes; length 0 commits) after saying
{"ready": true}, writes a temporary file beside the target and renames it over the target
only on commit, so an upload that fails or is cut off leaves the workspace as it was. get
refuses a file larger than its max_bytes from its size, before sending anything. kill ends
the program whose arguments carry a tag (the API let it go: sandbox code may have stopped it).

Paths are checked here, inside the container: lexically (no absolute paths, `..`, NUL),
then resolved with realpath (symlinks included) and refused when they lead outside the
workspace, then opened one component at a time from the workspace root with O_NOFOLLOW, so a
symlink swapped in meanwhile makes the operation fail instead of leading outside.
"""

import errno
import json
import os
import shutil
import signal
import stat
import struct
import sys

ROOT = os.environ.get("REPLCAST_WORKSPACE") or "/workspace"
TEMP_PREFIX = ".replcast-upload-"
CHUNK_BYTES = 1 << 20
MAX_LIST_ENTRIES = 10000
MAX_NAME_BYTES = 255
MAX_PATH_BYTES = 4096
# No progress for this long means the API went away: the process ends (a put removes its temp file).
IDLE_S = 120
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Fail(Exception):
    def __init__(self, code, message, size=None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.size = size


ERRNO_CODES = {
    errno.ENOENT: ("not_found", "no such file or folder"),
    errno.ENOTDIR: ("not_found", "a part of the path is not a folder"),
    errno.ENOSPC: ("no_space", "the workspace is full"),
    errno.EDQUOT: ("no_space", "the workspace is full"),
    errno.EISDIR: ("is_a_directory", "is a folder"),
    errno.ELOOP: ("invalid_path", "a symbolic link was found where none may be"),
    errno.ENAMETOOLONG: ("invalid_path", "the name is too long"),
    errno.EACCES: ("permission_denied", "the sandbox's file permissions refuse it"),
    errno.EPERM: ("permission_denied", "the sandbox's file permissions refuse it"),
    errno.EFBIG: ("too_large", "the file is too large"),
}


def os_fail(exc, path):
    code, message = ERRNO_CODES.get(exc.errno, ("io_error", exc.strerror or str(exc)))
    return Fail(code, "%s: %s" % (path or ".", message))


def emit(obj):
    data = (json.dumps(obj) + "\n").encode("utf-8")
    write_all(1, data)


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def on_idle(signum, frame):
    raise Fail("aborted", "no progress for %d s" % IDLE_S)


def split(path):
    """The path's names, checked lexically ('' and '.' names dropped)."""
    if not isinstance(path, str) or "\0" in path:
        raise Fail("invalid_path", "the path must be text without NUL bytes")
    if path.startswith("/"):
        raise Fail("invalid_path", "%s: absolute paths are not allowed; use a path relative to /workspace" % path)
    if len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        raise Fail("invalid_path", "the path is longer than %d bytes" % MAX_PATH_BYTES)
    names = [n for n in path.split("/") if n not in ("", ".")]
    if ".." in names:
        raise Fail("invalid_path", "%s: '..' is not allowed" % path)
    if any(len(n.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES for n in names):
        raise Fail("invalid_path", "%s: a name is longer than %d bytes" % (path, MAX_NAME_BYTES))
    return names


class Workspace:
    def __init__(self, root):
        self.root = os.path.realpath(root)

    def real(self, path, follow_last=True):
        """The names of the path's real location below the root (symlinks resolved), or invalid_path."""
        names = split(path)
        if not names:
            return names
        try:
            if follow_last:
                target = os.path.realpath(os.path.join(self.root, *names))
            else:
                target = os.path.join(os.path.realpath(os.path.join(self.root, *names[:-1])), names[-1])
        except OSError:
            # realpath saw a symbolic link that was gone when it read it (EINVAL): sandbox code is swapping links.
            raise Fail("invalid_path", "%s: a symbolic link on the path changed while it was resolved" % path) from None
        if target == self.root:
            return []
        if not target.startswith(self.root + os.sep):
            raise Fail("invalid_path", "%s: leads outside the workspace (through a symbolic link)" % path)
        return target[len(self.root) + 1:].split(os.sep)

    def open_dir(self, names, create=False):
        """A descriptor of the folder root/names, opened name by name without following links."""
        fd = os.open(self.root, DIR_FLAGS)
        for i, name in enumerate(names):
            try:
                try:
                    nfd = os.open(name, DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    try:
                        os.mkdir(name, 0o755, dir_fd=fd)
                    except FileExistsError:
                        pass
                    nfd = os.open(name, DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                where = "/".join(names[:i + 1])
                if exc.errno in (errno.ENOTDIR, errno.ELOOP) and create:
                    raise Fail("invalid_path", "%s: is not a folder" % where) from None
                raise os_fail(exc, where) from None
            finally:
                os.close(fd)
            fd = nfd
        return fd

    def lstat(self, dfd, name):
        try:
            return os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def entry(self, rel, st):
        is_dir = stat.S_ISDIR(st.st_mode)
        return {"path": rel, "type": "dir" if is_dir else "file", "size": 0 if is_dir else st.st_size, "mtime": st.st_mtime}


# -- operations ------------------------------------------------------------------------------


def op_put(ws, args):
    path = args.get("path")
    names = ws.real(path)
    if not names:
        raise Fail("is_a_directory", "the workspace itself is a folder")
    max_bytes = args.get("max_bytes")
    mode = args.get("mode")
    dfd = ws.open_dir(names[:-1], create=True)
    name = names[-1]
    rel = "/".join(names)
    before = ws.lstat(dfd, name)
    if before is not None and stat.S_ISDIR(before.st_mode):
        raise Fail("is_a_directory", "%s: is a folder" % rel)
    if before is not None and not stat.S_ISREG(before.st_mode):
        raise Fail("invalid_path", "%s: is not a regular file" % rel)
    if mode is None:
        mode = stat.S_IMODE(before.st_mode) if before is not None else 0o644
    temp = upload_prefix(args.get("tag")) + os.urandom(8).hex()
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dfd)
    try:
        emit({"ready": True})
        size = receive(fd, max_bytes, rel)
        os.fchmod(fd, mode & 0o777)
        os.close(fd)
        fd = -1
        os.rename(temp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        try:
            os.unlink(temp, dir_fd=dfd)
        except OSError:
            pass
        raise
    st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    return dict(ws.entry(rel, st), ok=True, created=before is None, size=size)


def is_tag(tag):
    """A run's tag, as the API makes them: a few hex digits."""
    return isinstance(tag, str) and 0 < len(tag) <= 32 and all(c in "0123456789abcdef" for c in tag)


def upload_prefix(tag):
    """The start of a put's temporary file names: its tag in them lets kill remove them."""
    return TEMP_PREFIX + tag + "-" if is_tag(tag) else TEMP_PREFIX


def read_exact(n):
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = os.readv(0, [view[got:]])
        if k == 0:
            raise Fail("aborted", "the upload ended before it was complete")
        got += k
    return view


def receive(fd, max_bytes, rel):
    """Writes stdin's frames to fd until the commit frame; returns the bytes written."""
    size = 0
    while True:
        signal.alarm(IDLE_S)
        (n,) = struct.unpack(">I", read_exact(4))
        if n == 0:
            signal.alarm(0)
            return size
        data = read_exact(n)
        size += n
        if max_bytes is not None and size > max_bytes:
            raise Fail("too_large", "%s: larger than %d bytes" % (rel, max_bytes))
        try:
            write_all(fd, data)
        except OSError as exc:
            raise os_fail(exc, rel) from None


def op_get(ws, args):
    names = ws.real(args.get("path"))
    if not names:
        raise Fail("is_a_directory", "the workspace itself is a folder")
    rel = "/".join(names)
    dfd = ws.open_dir(names[:-1])
    try:
        # O_NONBLOCK: opening a fifo planted by sandbox code must not hang.
        fd = os.open(names[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
    except OSError as exc:
        raise os_fail(exc, rel) from None
    st = os.fstat(fd)
    if stat.S_ISDIR(st.st_mode):
        raise Fail("is_a_directory", "%s: is a folder" % rel)
    if not stat.S_ISREG(st.st_mode):
        raise Fail("invalid_path", "%s: is not a regular file" % rel)
    max_bytes = args.get("max_bytes")
    if max_bytes is not None and st.st_size > max_bytes:
        # Told from the size before a byte is sent (a sparse file may claim far more than the disk holds).
        raise Fail("too_large", "%s: %d bytes, more than the %d a download may have" % (rel, st.st_size, max_bytes), st.st_size)
    emit(dict(ws.entry(rel, st), ok=True))
    global STREAMING
    STREAMING = True  # from here on stdout is the file's bytes: a failure can only cut them short
    offset, left = 0, st.st_size
    while left > 0:
        signal.alarm(IDLE_S)
        try:
            # In the kernel, without copying through this process (stdout is a pipe).
            n = os.sendfile(1, fd, offset, min(CHUNK_BYTES, left))
        except OSError as exc:
            if exc.errno not in (errno.EINVAL, errno.ENOSYS):
                raise
            data = os.pread(fd, min(CHUNK_BYTES, left), offset)
            write_all(1, data)
            n = len(data)
        if n == 0:
            break  # it shrank meanwhile: the API sees fewer bytes than announced
        offset += n
        left -= n
    return None


def op_list(ws, args):
    names = ws.real(args.get("path") or "")
    rel = "/".join(names)
    dfd = ws.open_dir(names[:-1]) if names else None
    st = ws.lstat(dfd, names[-1]) if names else os.stat(ws.root)
    if st is None:
        raise Fail("not_found", "%s: no such file or folder" % rel)
    if not stat.S_ISDIR(st.st_mode):
        if not stat.S_ISREG(st.st_mode):
            raise Fail("invalid_path", "%s: is not a regular file" % rel)
        return {"ok": True, "entries": [ws.entry(rel, st)], "truncated": False}
    entries = []
    truncated = walk(ws.open_dir(names), rel, bool(args.get("recursive")), entries, ws)
    entries.sort(key=lambda e: e["path"])
    return {"ok": True, "entries": entries, "truncated": truncated}


def walk(fd, rel, recursive, entries, ws):
    """Adds the folder's regular files and folders (links, fifos, sockets and uploads in progress
    are left out); True when the entry limit cut it short."""
    try:
        with os.scandir(fd) as it:
            children = [(e.name, e.stat(follow_symlinks=False)) for e in it]
        for name, st in children:
            if name.startswith(TEMP_PREFIX) or not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
                continue
            if len(entries) >= MAX_LIST_ENTRIES:
                return True
            child = rel + "/" + name if rel else name
            entries.append(ws.entry(child, st))
            if recursive and stat.S_ISDIR(st.st_mode):
                try:
                    sub = os.open(name, DIR_FLAGS, dir_fd=fd)
                except OSError:
                    continue  # removed or replaced meanwhile
                if walk(sub, child, True, entries, ws):
                    return True
        return False
    finally:
        os.close(fd)


def op_delete(ws, args):
    path = args.get("path")
    names = ws.real(path, follow_last=False)
    if not names:
        raise Fail("invalid_path", "the workspace itself cannot be deleted")
    rel = "/".join(names)
    dfd = ws.open_dir(names[:-1])
    st = ws.lstat(dfd, names[-1])
    if st is None:
        raise Fail("not_found", "%s: no such file or folder" % rel)
    try:
        if stat.S_ISDIR(st.st_mode):
            if not args.get("recursive"):
                raise Fail("is_a_directory", "%s: is a folder; delete it with recursive=true" % rel)
            shutil.rmtree(names[-1], dir_fd=dfd)
        else:
            os.unlink(names[-1], dir_fd=dfd)  # a link goes, not what it points at
    except OSError as exc:
        raise os_fail(exc, rel) from None
    return {"ok": True}


def op_kill(ws, args):
    """Kills the file program whose arguments carry the tag `target`: the API let it go before it
    ended, and sandbox code may have stopped it (SIGSTOP), which would keep its `docker exec` open
    for as long as the sandbox lives. Only this user's processes can be signalled; SIGKILL ends a
    stopped process too."""
    target = args.get("target")
    if not is_tag(target):
        raise Fail("bad_request", "kill needs the target's tag (hex digits)")
    script = os.fsencode(sys.argv[0])  # the targets were started with the same path
    killed = 0
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % name, "rb") as f:
                argv = f.read().split(b"\0")
            theirs = json.loads(argv[-2]) if len(argv) >= 3 and argv[-3] == script else None
        except (OSError, ValueError):
            continue  # gone meanwhile, or not a file program
        if isinstance(theirs, dict) and theirs.get("tag") == target and theirs.get("op") != "kill":
            try:
                os.kill(int(name), signal.SIGKILL)
            except OSError:
                continue
            killed += 1
            if theirs.get("op") == "put":
                drop_uploads(ws, theirs.get("path"), target)
    return {"ok": True, "killed": killed}


def drop_uploads(ws, path, tag):
    """Removes the temporary files of the put tagged `tag`: killed, it cannot remove them itself."""
    try:
        dfd = ws.open_dir(ws.real(path)[:-1])
    except (Fail, OSError):
        return  # the path changed meanwhile: what is left is sandbox code's doing
    try:
        for name in os.listdir(dfd):
            if name.startswith(upload_prefix(tag)):
                try:
                    os.unlink(name, dir_fd=dfd)
                except OSError:
                    pass
    finally:
        os.close(dfd)


OPS = {"put": op_put, "get": op_get, "list": op_list, "delete": op_delete, "kill": op_kill}
STREAMING = False


def main(argv):
    signal.signal(signal.SIGALRM, on_idle)
    signal.alarm(IDLE_S)
    try:
        args = json.loads(argv[1])
        op = OPS[args["op"]]
    except (IndexError, ValueError, KeyError, TypeError):
        emit({"ok": False, "code": "bad_request", "message": "usage: fileio.py '{\"op\": \"put|get|list|delete|kill\", ...}'"})
        return 2
    try:
        result = op(Workspace(ROOT), args)
    except (Fail, OSError) as exc:
        if STREAMING:
            return 1
        fail = exc if isinstance(exc, Fail) else os_fail(exc, args.get("path"))
        answer = {"ok": False, "code": fail.code, "message": fail.message}
        if fail.size is not None:
            answer["size"] = fail.size  # too_large of a get: the file's size
        emit(answer)
        return 1
    if result is not None:
        emit(result)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except BrokenPipeError:
        os._exit(1)  # the API went away mid-transfer
