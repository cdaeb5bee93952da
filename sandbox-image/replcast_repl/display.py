"""Rich display: IPython-style mime bundles and matplotlib figures.

matplotlib is never imported by the REPL itself (it costs time); an import
hook (hooks.py) patches `pyplot.show` when user code imports pyplot, and open
figures are rendered to PNG and closed at the end of every execution. Nothing
heavy (pprint, base64) is imported before a value needs it.
"""

import sys
from binascii import b2a_base64

from . import hooks

# (method, mime) in IPython's formatter order.
_REPR_METHODS = (
    ("_repr_html_", "text/html"),
    ("_repr_markdown_", "text/markdown"),
    ("_repr_svg_", "image/svg+xml"),
    ("_repr_png_", "image/png"),
    ("_repr_jpeg_", "image/jpeg"),
    ("_repr_latex_", "text/latex"),
    ("_repr_json_", "application/json"),
    ("_repr_javascript_", "application/javascript"),
    ("_repr_pdf_", "application/pdf"),
)
BINARY_MIMES = ("image/png", "image/jpeg", "application/pdf")
_PPRINT_TYPES = (dict, list, tuple, set, frozenset)


def _class_method(obj, name):
    # Looked up on the class, as IPython does, so objects whose __getattr__
    # answers every name (mocks, proxies) are not mistaken for rich objects.
    try:
        attr = getattr(type(obj), name, None)
    except Exception:
        return None
    if attr is None or not callable(attr):
        return None
    return getattr(obj, name)


def plain_text(obj):
    """text/plain like IPython: pretty-printed builtin containers, repr otherwise."""
    text = repr(obj)
    if type(obj) in _PPRINT_TYPES and 79 < len(text) <= 200_000:
        import pprint
        return pprint.pformat(obj, width=79, sort_dicts=False)
    return text


def _figure_class():
    mod = sys.modules.get("matplotlib.figure")
    return getattr(mod, "Figure", None) if mod is not None else None


def figure_png(fig):
    import io
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return buf.getvalue()


def mime_bundle(obj):
    """Returns (data, metadata) for obj. Exceptions from user reprs propagate."""
    data = {}
    metadata = {}
    fig_cls = _figure_class()
    if fig_cls is not None and isinstance(obj, fig_cls):
        data["image/png"] = figure_png(obj)
    mimebundle = _class_method(obj, "_repr_mimebundle_")
    if mimebundle is not None:
        got = mimebundle()
        if isinstance(got, tuple) and len(got) == 2:
            got, md = got
            if isinstance(md, dict):
                metadata.update(md)
        if isinstance(got, dict):
            data.update({k: v for k, v in got.items() if isinstance(k, str)})
    for method, mime in _REPR_METHODS:
        if mime in data:
            continue
        fn = _class_method(obj, method)
        if fn is None:
            continue
        got = fn()
        if isinstance(got, tuple) and len(got) == 2:
            got, md = got
            if isinstance(md, dict):
                metadata[mime] = md
        if got is not None:
            data[mime] = got
    if "text/plain" not in data:
        data["text/plain"] = plain_text(obj)
    for mime in BINARY_MIMES:
        value = data.get(mime)
        if isinstance(value, (bytes, bytearray, memoryview)):
            data[mime] = b64encode(value)
    for mime, value in list(data.items()):
        if mime not in BINARY_MIMES and isinstance(value, (bytes, bytearray)):
            data[mime] = bytes(value).decode("utf-8", "replace")
    return data, metadata


# -- matplotlib -------------------------------------------------------------

class _Display:
    """Set by the executor: show_figures(figs) emits display frames."""
    show_figures = None


def open_figures():
    """Open pyplot figures, in creation order; [] if pyplot was never imported."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return []
    try:
        return [plt.figure(n) for n in plt.get_fignums()]
    except Exception:
        return []


def close_figures(figs=None):
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    try:
        if figs is None:
            plt.close("all")
        else:
            for fig in figs:
                plt.close(fig)
    except Exception:
        pass


def _show(*args, **kwargs):
    """pyplot.show replacement: displays open figures now, closes them, never blocks."""
    if _Display.show_figures is not None:
        _Display.show_figures(open_figures())


def b64encode(data):
    """base64.b64encode(data) as str, without importing base64."""
    return b2a_base64(data, newline=False).decode("ascii")


def _patch_pyplot(pyplot):
    pyplot.show = _show


def install_pyplot_hook():
    hooks.install(_patch_pyplot)
