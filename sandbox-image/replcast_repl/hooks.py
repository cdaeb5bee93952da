"""Work the REPL does only once user code imports a module, so that nothing heavy is imported at start:
matplotlib's font cache is seeded before `matplotlib` runs, `pyplot.show` is patched after
`matplotlib.pyplot` runs, and the cells' source is handed to `linecache` when it is imported (by
traceback, inspect, warnings or user code), so tracebacks and inspect.getsource show cell lines.
"""

import os
import sys
from importlib.machinery import PathFinder

_BEFORE = {}  # module name -> callable() run before the module's code
_AFTER = {}   # module name -> callable(module) run after it
_CELLS = {}   # cell filename -> source, until linecache is imported


def register_cell(filename, source):
    """Makes a cell's source known to linecache (now, or when it is imported)."""
    linecache = sys.modules.get("linecache")
    if linecache is None:
        _CELLS[filename] = source
    else:
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)


def _fill_linecache(linecache):
    for filename, source in _CELLS.items():
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    _CELLS.clear()


def _seed_matplotlib_cache():
    """Copies the font cache baked at build time into the writable MPLCONFIGDIR."""
    seed = os.environ.get("REPLCAST_MPL_SEED")
    target = os.environ.get("MPLCONFIGDIR")
    if not seed or not target or not os.path.isdir(seed):
        return
    try:
        if not os.path.isdir(target) or not os.listdir(target):
            import shutil
            shutil.copytree(seed, target, dirs_exist_ok=True)
    except OSError as exc:
        from .channel import log
        log("matplotlib cache not seeded: %s" % exc)


class _Loader:
    """Wraps a module's loader to run the hooks around its code; the rest is the real loader's."""

    def __init__(self, inner, name):
        self._inner = inner
        self._name = name

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        before = _BEFORE.pop(self._name, None)
        if before is not None:
            before()
        self._inner.exec_module(module)
        after = _AFTER.pop(self._name, None)
        if after is not None:
            after(module)

    def __getattr__(self, name):
        # get_source, get_filename, ... answered by the real loader.
        if name == "_inner":
            raise AttributeError(name)
        return getattr(self._inner, name)


class _Finder:
    def find_spec(self, fullname, path=None, target=None):
        if fullname not in _BEFORE and fullname not in _AFTER:
            return None
        spec = PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _Loader(spec.loader, fullname)
        return spec


def install(patch_pyplot):
    """patch_pyplot(module) runs after matplotlib.pyplot is first imported."""
    _BEFORE["matplotlib"] = _seed_matplotlib_cache
    _AFTER["matplotlib.pyplot"] = patch_pyplot
    if "linecache" in sys.modules:
        _fill_linecache(sys.modules["linecache"])
    else:
        _AFTER["linecache"] = _fill_linecache
    sys.meta_path.insert(0, _Finder())
