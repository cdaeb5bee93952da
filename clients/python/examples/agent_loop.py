"""An agent loop: a model writes Python, a replcast session runs it, and what it printed (or its
traceback) goes back to the model, until the model answers in words or runs out of steps.

The model here is a stand-in with written replies, so the example runs offline against any replcast
server: replace `StandInModel.complete` with a call to your LLM (OpenAI, Anthropic, a local model).

    REPLCAST_URL=http://127.0.0.1:8080 REPLCAST_API_KEY=... python3 examples/agent_loop.py
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional

from replcast import Client, Session

MAX_STEPS = 6  # an agent loop is bounded: a confused model must not run forever
MAX_OUTPUT_CHARS = 2000  # what the model sees of one run's output
SYSTEM = "Answer the user's question. To compute, reply with one ```python block; you will see what it printed."


class StandInModel:
    """Plays the model: writes code, makes a mistake, reads the traceback, fixes it, then answers
    from the output it was shown. It reads only the conversation, as a real model would."""

    def complete(self, messages: List[Dict[str, str]]) -> str:
        seen = messages[-1]["content"]
        if messages[-1]["role"] == "user" and len(messages) == 2:
            return "```python\nprint(sum(primes_below(50)))\n```"  # forgets to define primes_below
        if "NameError" in seen:
            return (
                "I need to define it first.\n```python\n"
                "def primes_below(n):\n"
                "    return [k for k in range(2, n) if all(k % d for d in range(2, int(k ** 0.5) + 1))]\n\n"
                "print(sum(primes_below(50)))\n```"
            )
        return f"The sum of the primes below 50 is {seen.split()[-1]}."


def code_in(reply: str) -> Optional[str]:
    """The reply's ```python block, or None when the model answered in words."""
    m = re.search(r"```(?:python)?\n(.*?)```", reply, re.S)
    return m.group(1) if m else None


def observation(session: Session, code: str) -> str:
    """Runs the model's code in the session; what the model gets back: the output, and the traceback
    when it failed (an error is information for the model, not an exception for the loop)."""
    ex = session.run(code, timeout_s=30)
    text = ex.stdout + ex.stderr
    if ex.error is not None:
        text += f"\n{ex.error}"
    elif ex.status != "ok":
        text += f"\n(the run ended: {ex.status})"
    return f"Output:\n{text[-MAX_OUTPUT_CHARS:] or '(nothing printed)'}"


def agent(question: str, model: StandInModel, session: Session) -> str:
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
    for step in range(1, MAX_STEPS + 1):
        reply = model.complete(messages)
        messages.append({"role": "assistant", "content": reply})
        code = code_in(reply)
        if code is None:
            return reply
        seen = observation(session, code)
        print(f"[step {step}] ran {len(code.splitlines())} lines -> {seen.splitlines()[-1]}")
        messages.append({"role": "user", "content": seen})
    raise RuntimeError(f"no answer after {MAX_STEPS} steps")


def main() -> None:
    with Client() as client, client.sessions.create(idle_timeout_s=120) as session:
        print(agent("What is the sum of the primes below 50?", StandInModel(), session))


if __name__ == "__main__":
    main()
