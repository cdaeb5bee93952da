"""The client's connections with TCP_NODELAY. httpx writes a request's headers and its body in two
writes; with Nagle's algorithm on, the body waits for the ACK of the headers, which the server delays
(40 ms on Linux) on a kept-alive connection, so every POST and PUT after the first would pay 40 ms.
urllib3 and Node's fetch set TCP_NODELAY for the same reason. httpx >= 0.24.1 takes socket_options;
older ones (Debian 12 has 0.23) get their connection pool's network backend wrapped instead.
"""
from __future__ import annotations

import socket
from typing import Any, Dict, List, Tuple

import httpx

NODELAY: List[Tuple[int, int, int]] = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]


def transport() -> httpx.HTTPTransport:
    options: Dict[str, Any] = {"socket_options": NODELAY}
    try:
        return httpx.HTTPTransport(**options)
    except TypeError:
        t = httpx.HTTPTransport()
        _wrap_backend(t, _NoDelay)
        return t


def async_transport() -> httpx.AsyncHTTPTransport:
    options: Dict[str, Any] = {"socket_options": NODELAY}
    try:
        return httpx.AsyncHTTPTransport(**options)
    except TypeError:
        t = httpx.AsyncHTTPTransport()
        _wrap_backend(t, _AsyncNoDelay)
        return t


def _wrap_backend(t: object, wrapper: type) -> None:
    # Only where the pool has the shape of httpcore 0.16 to 1.x; anything else keeps its default.
    pool = getattr(t, "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if backend is not None and hasattr(backend, "connect_tcp"):
        setattr(pool, "_network_backend", wrapper(backend))


def _nodelay(stream: Any) -> Any:
    sock = stream.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return stream


class _NoDelay:
    """httpcore's network backend, its TCP streams with TCP_NODELAY; everything else passed through."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def connect_tcp(self, *args: Any, **kwargs: Any) -> Any:
        return _nodelay(self._inner.connect_tcp(*args, **kwargs))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _AsyncNoDelay(_NoDelay):
    async def connect_tcp(self, *args: Any, **kwargs: Any) -> Any:
        return _nodelay(await self._inner.connect_tcp(*args, **kwargs))
