"""replcast in-sandbox REPL server (Python standard library only).

See sandbox-image/README.md for the wire protocol.
"""
