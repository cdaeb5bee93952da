"""The installed package carries its types (PEP 561: py.typed): mypy --strict checks a program that
uses it, and catches a wrong call in one."""
from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest

GOOD = '''
from typing import List, Optional
from replcast import Client, Event, Execution, NotFoundError, Process, QuotaExceededError
from replcast.types import FileEntry

def main(client: Client) -> None:
    with client.sessions.create(idle_timeout_s=60, metadata={"a": "b"}) as session:
        ex: Execution = session.run("print(1)", timeout_s=5)
        texts: List[str] = [e.text for e in session.stream("print(2)") if isinstance(e, Event)]
        entry: FileEntry = session.files.write("a.txt", b"x")
        size: int = entry["size"]
        proc: Process = session.processes.start("sleep 1", cwd="sub", env={"A": "b"})
        proc.signal("TERM")
        exit_code: Optional[int] = proc.wait()
        lines: List[str] = [e.text for e in proc.output(last_event_id=None) if e.type == "stdout"]
        try:
            client.sessions.get("ses_x")
        except QuotaExceededError as err:
            wait: float | None = err.retry_after
        except NotFoundError as err:
            code: str = err.code
'''
BAD = '''
from replcast import Client

def main(client: Client) -> None:
    client.sessions.create().run(123)
    client.sessions.create().processes.start("true").signal("TERMINATE")
'''


def test_the_installed_package_has_its_type_marker_and_one_version() -> None:
    import replcast

    assert (Path(replcast.__file__).parent / "py.typed").is_file()
    assert importlib.metadata.version("replcast") == replcast.__version__


def mypy(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "consumer.py").write_text(source)
    # The interpreter running these tests is the one the package is installed for: mypy reads it from there.
    return subprocess.run([sys.executable, "-m", "mypy", "--strict", "consumer.py"], cwd=tmp_path, capture_output=True, text=True, timeout=240)


def test_mypy_strict_checks_a_consumer_against_the_installed_types(tmp_path: Path) -> None:
    if subprocess.run([sys.executable, "-m", "mypy", "--version"], capture_output=True).returncode != 0:
        pytest.skip("mypy is not installed")
    good = mypy(tmp_path, GOOD)
    assert good.returncode == 0, good.stdout
    bad = mypy(tmp_path, BAD)
    assert bad.returncode == 1 and 'Argument 1 to "run" of "Session" has incompatible type "int"' in bad.stdout, bad.stdout
    assert 'Argument 1 to "signal" of "Process" has incompatible type "Literal[\'TERMINATE\']"' in bad.stdout, bad.stdout
