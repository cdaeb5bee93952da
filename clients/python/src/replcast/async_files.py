"""session.files of the AsyncClient, the twin of files.py: uploads read in pieces as they are sent
(an async iterable of bytes too), downloads in pieces as they arrive."""
from __future__ import annotations

import os
from typing import IO, TYPE_CHECKING, AsyncIterator, Iterator, Optional, Union, cast

import httpx

from . import types
from ._shared import AsyncFileData, upload
from .files import DOWNLOAD_CHUNK_BYTES, FileListing

if TYPE_CHECKING:
    from .async_client import AsyncClient


class AsyncFiles:
    def __init__(self, client: AsyncClient, session_id: str) -> None:
        self._client = client
        self._id = session_id

    async def write(self, path: str, data: AsyncFileData, *, mode: Optional[Union[int, str]] = None) -> types.FileEntry:
        """Files.write, awaited; `data` may also be an async iterable of bytes. A file object is read
        in pieces (blocking reads, as a local file's are)."""
        if hasattr(data, "__aiter__"):
            content: AsyncFileData = data
            headers = {"content-type": "application/octet-stream"}
        else:
            sync_content, headers = upload(data)
            content = sync_content if isinstance(sync_content, bytes) else _aiter(sync_content)
        params = {"mode": format(mode, "o") if isinstance(mode, int) else mode} if mode is not None else None
        resp = await self._client.request("put_file", id=self._id, path=path, content=content, headers=headers, params=params)
        return cast(types.FileEntry, resp.json())

    async def read(self, path: str) -> bytes:
        return (await self._client.request("get_file", id=self._id, path=path, headers={"accept": "*/*"})).content

    async def read_text(self, path: str, encoding: str = "utf-8") -> str:
        return (await self.read(path)).decode(encoding)

    async def iter_bytes(self, path: str) -> AsyncIterator[bytes]:
        """A file's bytes in pieces as they arrive: `async for chunk in await files.iter_bytes(path)`."""
        resp = await self._client.request("get_file", id=self._id, path=path, headers={"accept": "*/*"}, stream=True)
        return _pieces(resp)

    async def download(self, path: str, dest: Union[str, os.PathLike[str], IO[bytes]]) -> int:
        """Streams a file to `dest` (a local path, or a binary file object); answers the bytes written."""
        chunks = await self.iter_bytes(path)
        if isinstance(dest, (str, os.PathLike)):
            with open(dest, "wb") as f:
                return await _copy(chunks, f)
        return await _copy(chunks, dest)

    async def list(self, path: str = "", recursive: bool = False) -> FileListing:
        params = {k: v for k, v in (("path", path), ("recursive", "true" if recursive else "")) if v}
        body = cast(types.FileList, (await self._client.request("list_files", id=self._id, params=params)).json())
        out = FileListing(body["files"])
        out.truncated = body["truncated"]
        return out

    async def remove(self, path: str, recursive: bool = False) -> None:
        await self._client.request("delete_file", id=self._id, path=path, params={"recursive": "true"} if recursive else None)


async def _pieces(resp: httpx.Response) -> AsyncIterator[bytes]:
    try:
        async for chunk in resp.aiter_bytes(DOWNLOAD_CHUNK_BYTES):
            yield chunk
    finally:
        await resp.aclose()


async def _aiter(chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


async def _copy(chunks: AsyncIterator[bytes], dest: IO[bytes]) -> int:
    n = 0
    async for chunk in chunks:
        dest.write(chunk)
        n += len(chunk)
    return n
