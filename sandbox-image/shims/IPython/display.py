"""IPython.display's common names, rendered by the replcast REPL.

display() sends display frames; the wrapper classes carry the _repr_*_ methods
the REPL's formatter knows (text/html, text/markdown, image/png, ...).
"""

import json as _json


def display(*objs, metadata=None, **_ignored):
    from replcast_repl import helpers
    if helpers.DISPLAY is None:
        raise RuntimeError("display() is only available inside the replcast REPL")
    helpers.DISPLAY(*objs, metadata=metadata)


def clear_output(wait=False):
    """Output already sent cannot be taken back; accepted for compatibility."""


class _Data:
    def __init__(self, data=None, url=None, filename=None, **_ignored):
        if filename is not None:
            with open(filename, "rb" if self._binary else "r") as f:
                data = f.read()
        self.data = data
        self.url = url

    _binary = False

    def __repr__(self):
        return "<%s object>" % type(self).__name__


class HTML(_Data):
    def _repr_html_(self):
        return self.data


class Markdown(_Data):
    def _repr_markdown_(self):
        return self.data


class Latex(_Data):
    def _repr_latex_(self):
        return self.data


class Math(_Data):
    def _repr_latex_(self):
        return "$\\displaystyle %s$" % self.data


class SVG(_Data):
    def _repr_svg_(self):
        return self.data


class JSON(_Data):
    def _repr_json_(self):
        return self.data if not isinstance(self.data, str) else _json.loads(self.data)


class Pretty(_Data):
    def __repr__(self):
        return str(self.data)


class Image(_Data):
    _binary = True

    def __init__(self, data=None, url=None, filename=None, format=None, **kw):
        super().__init__(data, url, filename, **kw)
        head = bytes(self.data[:4]) if isinstance(self.data, (bytes, bytearray)) else b""
        self.format = (format or ("jpeg" if head[:2] == b"\xff\xd8" else "png")).lower()

    def _repr_png_(self):
        return bytes(self.data) if self.format == "png" else None

    def _repr_jpeg_(self):
        return bytes(self.data) if self.format in ("jpeg", "jpg") else None
