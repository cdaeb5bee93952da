"""Host frames: parsing (with recovery of a frame after leaked junk) and the `ready` frame.

Every REPL frame is one line of ASCII JSON with "v":1, "type" and a strictly
increasing "seq" (channel.py writes them). Parsing uses the C scanner behind
json.loads without importing json (and re) until a line fails to parse.
"""

import _json
import os
import sys

from .channel import MAX_LINE_BYTES, PROTOCOL_VERSION, Channel

# Channel is still importable from here (test/helpers/channel-attack.ts finds the REPL's one).
__all__ = ["Channel", "ReplyError", "parse_frame", "ready_fields"]


class ReplyError(Exception):
    """Becomes an ok:false reply with error {code, message}."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


class _ScanContext:
    """What json's C scanner reads from a JSONDecoder: the defaults of json.loads."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int

    @staticmethod
    def parse_constant(name):
        return float(name)  # NaN, Infinity, -Infinity, as json.loads


_scan = _json.make_scanner(_ScanContext())


def _loads(text):
    """json.loads for a stripped line: ValueError unless it is exactly one JSON value."""
    try:
        obj, end = _scan(text, 0)
    except StopIteration:
        raise ValueError("no JSON value") from None
    if end != len(text):
        raise ValueError("extra data")
    return obj


def _raw_decode(text, pos):
    try:
        return _scan(text, pos)
    except StopIteration:
        raise ValueError("no JSON value") from None


def parse_frame(line):
    """Returns (frame, problem). frame is a dict with a string "type" or None.

    A line that is junk followed by a valid frame (bytes leaked by the attach
    request before the first frame) yields the frame plus a problem note.
    """
    if line is None:
        return None, "line longer than %d bytes dropped" % MAX_LINE_BYTES
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        text = line.decode("utf-8", "replace")
        return _recover(text, "line is not valid UTF-8: " + _preview(text))
    stripped = text.strip()
    if not stripped:
        return None, None
    try:
        obj = _loads(stripped)
    except ValueError:
        return _recover(stripped, "line is not valid JSON: " + _preview(stripped))
    problem = _check(obj)
    return (obj, None) if problem is None else (None, problem + ": " + _preview(stripped))


def _preview(text, limit=80):
    return repr(text[:limit]) + ("..." if len(text) > limit else "")


def _check(obj):
    if not isinstance(obj, dict):
        return "frame is not a JSON object"
    if not isinstance(obj.get("type"), str):
        return "frame has no string 'type'"
    if "v" in obj and obj["v"] != PROTOCOL_VERSION:
        return "unsupported protocol version %r" % (obj["v"],)
    return None


def _recover(text, problem, max_attempts=200):
    """Finds a valid frame that ends the line after some junk prefix.

    Scans '{' positions from the right: nested objects never end the line, so
    the first decode that consumes the rest of the line is the frame.
    """
    if len(text) > (1 << 20):
        return None, problem
    pos = text.rfind("{")
    attempts = 0
    while pos > 0 and attempts < max_attempts:
        attempts += 1
        try:
            obj, end = _raw_decode(text, pos)
        except ValueError:
            pass
        else:
            if not text[end:].strip() and _check(obj) is None:
                return obj, problem + "; junk before a frame was skipped"
        pos = text.rfind("{", 0, pos)
    return None, problem


def ready_fields(limits):
    return {
        "python": "%d.%d.%d" % sys.version_info[:3],
        "protocol": PROTOCOL_VERSION,
        "pid": os.getpid(),
        "limits": limits.as_dict(),
    }
