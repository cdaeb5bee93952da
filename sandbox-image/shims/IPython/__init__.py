"""A small stand-in for IPython inside the replcast sandbox.

Code written for notebooks often does `from IPython.display import display, HTML`;
this package makes that work (rendered by the replcast REPL as display frames).
Nothing else of IPython is provided: get_ipython() answers None, as outside IPython.
"""

from . import display  # noqa: F401

__version__ = "0.0-replcast"


def get_ipython():
    return None
