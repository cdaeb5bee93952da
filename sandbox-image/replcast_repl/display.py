"""Rich display: IPython-style mime bundles and matplotlib figures.

matplotlib is never imported by the REPL itself (it costs time); an import
hook patches `pyplot.show` when user code imports pyplot, and open figures
are rendered to PNG and closed at the end of every execution.
"""

import base64
import importlib.abc
import importlib.machinery
import pprint
import sys

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
            data[mime] = base64.b64encode(bytes(value)).decode("ascii")
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


class _PyplotHook(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Patches matplotlib.pyplot.show right after pyplot is first imported."""

    def find_spec(self, fullname, path, target=None):
        if fullname != "matplotlib.pyplot":
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        self._inner = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        module.show = _show

    def __getattr__(self, name):
        # get_source, get_filename, ... answered by the real loader.
        if name == "_inner":
            raise AttributeError(name)
        return getattr(self._inner, name)


def install_pyplot_hook():
    sys.meta_path.insert(0, _PyplotHook())
