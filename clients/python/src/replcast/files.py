"""session.files of the blocking client: the session's /workspace, streamed both ways. An upload
from a file object is read in pieces as it is sent, and a download can go to a file piece by piece,
so a file of any size moves in bounded memory.
"""
from __future__ import annotations

import os
from typing import IO, TYPE_CHECKING, Iterator, List, Optional, Union, cast

from . import types
from ._shared import FileData, upload

if TYPE_CHECKING:
    from .client import Client

DOWNLOAD_CHUNK_BYTES = 256 * 1024


class FileListing(List[types.FileEntry]):
    """The entries of a listing ({path, type: file|dir, size, modified_at}), sorted by path.
    `truncated` is true when the folder held more than the server lists (10,000 entries)."""

    truncated: bool = False


class Files:
    def __init__(self, client: Client, session_id: str) -> None:
        self._client = client
        self._id = session_id

    def write(self, path: str, data: FileData, *, mode: Optional[Union[int, str]] = None) -> types.FileEntry:
        """Writes a file in /workspace (parent folders made; a file replaced whole or not at all).
        `data`: bytes, str (UTF-8), a binary file object (streamed) or an iterable of bytes (streamed).
        `mode`: 0o755 or "755". Answers the new entry."""
        content, headers = upload(data)
        params = {"mode": format(mode, "o") if isinstance(mode, int) else mode} if mode is not None else None
        resp = self._client.request("put_file", id=self._id, path=path, content=content, headers=headers, params=params)
        return cast(types.FileEntry, resp.json())

    def read(self, path: str) -> bytes:
        """A file's bytes, whole (download() or iter_bytes() stream them)."""
        return self._client.request("get_file", id=self._id, path=path, headers={"accept": "*/*"}).content

    def read_text(self, path: str, encoding: str = "utf-8") -> str:
        return self.read(path).decode(encoding)

    def iter_bytes(self, path: str) -> Iterator[bytes]:
        """A file's bytes in pieces as they arrive. The request is made at once (a missing file raises
        here); leaving the loop early closes the connection."""
        resp = self._client.request("get_file", id=self._id, path=path, headers={"accept": "*/*"}, stream=True)

        def pieces() -> Iterator[bytes]:
            try:
                yield from resp.iter_bytes(DOWNLOAD_CHUNK_BYTES)
            finally:
                resp.close()

        return pieces()

    def download(self, path: str, dest: Union[str, os.PathLike[str], IO[bytes]]) -> int:
        """Streams a file to `dest` (a local path, or a binary file object); answers the bytes written."""
        chunks = self.iter_bytes(path)
        if isinstance(dest, (str, os.PathLike)):
            with open(dest, "wb") as f:
                return _copy(chunks, f)
        return _copy(chunks, dest)

    def list(self, path: str = "", recursive: bool = False) -> FileListing:
        """A folder's files and folders (default /workspace itself; `recursive`: everything below it)."""
        params = {k: v for k, v in (("path", path), ("recursive", "true" if recursive else "")) if v}
        body = cast(types.FileList, self._client.request("list_files", id=self._id, params=params).json())
        out = FileListing(body["files"])
        out.truncated = body["truncated"]
        return out

    def remove(self, path: str, recursive: bool = False) -> None:
        """Deletes a file, or a folder with everything in it when `recursive`."""
        self._client.request("delete_file", id=self._id, path=path, params={"recursive": "true"} if recursive else None)


def _copy(chunks: Iterator[bytes], dest: IO[bytes]) -> int:
    n = 0
    for chunk in chunks:
        dest.write(chunk)
        n += len(chunk)
    return n
