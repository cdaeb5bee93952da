"""Entry point: `python3 -m replcast_repl` speaks the replcast protocol on stdin/stdout."""

from .server import main

main()
