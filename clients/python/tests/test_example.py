"""The README's agent-loop example runs as written, against the live server."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "agent_loop.py"


def test_the_agent_loop_example_corrects_its_mistake_and_answers(url: str, api_key: str) -> None:
    env = {**os.environ, "REPLCAST_URL": url, "REPLCAST_API_KEY": api_key}
    out = subprocess.run([sys.executable, str(EXAMPLE)], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("[step 1]") and "NameError" in lines[0], "the first try fails and the traceback goes back"
    assert lines[1].startswith("[step 2]") and lines[1].endswith("-> 328")
    assert lines[-1] == "The sum of the primes below 50 is 328."
