"""A TCP proxy in front of the server whose open connections a test can cut at will: what a proxy
timeout, a load balancer's restart or a network blip does to a live event stream."""
from __future__ import annotations

import socket
import threading
from typing import Set, Tuple
from urllib.parse import urlsplit


class CuttingProxy:
    def __init__(self, target_url: str) -> None:
        parts = urlsplit(target_url)
        self._target: Tuple[str, int] = (parts.hostname or "127.0.0.1", parts.port or 80)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self.connections = 0
        """Connections accepted so far."""
        self._open: Set[socket.socket] = set()
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                down, _ = self._listener.accept()
            except OSError:
                return  # closed
            up = socket.create_connection(self._target)
            with self._lock:
                self.connections += 1
                self._open.update((down, up))
            for src, dst in ((down, up), (up, down)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            self._drop(src)
            self._drop(dst)

    def _drop(self, s: socket.socket) -> None:
        with self._lock:
            self._open.discard(s)
        try:
            # shutdown, not just close: it wakes the other pump blocked in recv on this socket.
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()

    def cut(self) -> int:
        """Cuts every open connection, both ways; answers how many sockets it cut."""
        with self._lock:
            sockets = list(self._open)
        for s in sockets:
            self._drop(s)
        return len(sockets)

    def close(self) -> None:
        self._listener.close()
        self.cut()
