"""The sizes the REPL shares with the host, read once from the environment.

The host is their one source: it starts every container with
REPLCAST_MAX_FRAME_BYTES, REPLCAST_MAX_PROMPT_CHARS, REPLCAST_MAX_STREAM_BYTES
and REPLCAST_MAX_IMAGE_BYTES. The fallbacks below serve only standalone use
(`docker run -i <image>` without them, the pipe test suite). Every other size
the REPL emits is derived from the frame limit, and the `ready` frame reports
all of them (`limits`).
"""

import os

# name in the ready frame -> fallback; the variable is REPLCAST_<NAME>.
FALLBACKS = {
    "max_frame_bytes": 16 * 1024 * 1024,  # longest line the host reads from the REPL
    "max_prompt_chars": 1_000_000,        # longest llm_query/llm_batch prompt the host accepts
    "max_stream_bytes": 1_000_000,        # default output cap of an execution
    "max_image_bytes": 5_000_000,         # default cap of one image
}


def _read(environ, name, fallback):
    try:
        value = int(environ.get(name, fallback))
    except ValueError:
        return fallback
    return value if value > 0 else fallback


class Limits:
    def __init__(self, environ=os.environ):
        for key, fallback in FALLBACKS.items():
            setattr(self, key, _read(environ, "REPLCAST_" + key.upper(), fallback))
        frame = self.max_frame_bytes
        # Shares of one frame line (10, 4 and 15 MiB of 16): base64 grows an
        # image by 4/3, and the rest leaves room for the other fields and mimes
        # of the frame.
        self.image_bytes_ceiling = frame * 5 // 8     # one image, raw, whatever max_image_bytes says
        self.text_mime_bytes = frame // 4             # one text entry of a result or display bundle
        self.llm_request_bytes = frame * 15 // 16     # the prompts of one llm_request, JSON-encoded

    def as_dict(self):
        return dict(vars(self))
