"""What the executor runs: a job (an execute or a streamed execution, as the host asked for it) and
the context of the execution running it (its count, caps and what was dropped)."""

import time
from _queue import SimpleQueue


class ExecuteJob:
    def __init__(self, exec_id, code, display_last, max_stream, max_image, language="python"):
        self.exec_id = exec_id
        self.code = code
        self.language = language  # python, or bash (a child process; see shell.py)
        self.display_last = display_last
        self.max_stream = max_stream
        self.max_image = max_image


class StreamJob(ExecuteJob):
    """A streamed execution; chunks arrive on `inbox` from the reader thread."""

    def __init__(self, exec_id, display_last, max_stream, max_image):
        super().__init__(exec_id, None, display_last, max_stream, max_image)
        self.inbox = SimpleQueue()
        self.finished = False


class ExecContext:
    def __init__(self, job, count, limits):
        self.exec_id = job.exec_id
        self.count = count
        self.max_stream = job.max_stream
        self.max_image = min(job.max_image, limits.image_bytes_ceiling)
        self.max_text = min(job.max_stream, limits.text_mime_bytes)
        self.started = time.monotonic()
        self.text_dropped = 0
        self.image_dropped = 0
        self.final_sent = False
