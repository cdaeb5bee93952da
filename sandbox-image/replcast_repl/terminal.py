"""Ends a terminal and what it started, for the API, run by `docker exec` as the sandbox user:

    python3 -I -S /opt/replcast/replcast_repl/terminal.py kill TAG

A terminal is an interactive bash that the API starts with `docker exec` in a pseudo-terminal,
with REPLCAST_TERMINAL=TAG in its environment. Docker keeps such a shell running after the exec's
connection closes (it holds the pseudo-terminal open), so when the API lets a terminal go it runs
this program. It kills, with SIGKILL:

- every process whose environment was started with the tag: the shell and what it started, even
  what left the shell's session with setsid or nohup;
- every process in the sessions those processes lead: the shell's jobs, and children started with
  a cleared environment (env -i). A session whose leader carries no tag (the REPL's) is never
  touched, even when a process in it forged the tag.

It scans /proc again until a scan finds nothing more (processes forked meanwhile), a few times at
most. Only this user's processes can be signalled. stdout: one JSON line, {"killed": N}.
"""

import json
import os
import signal
import sys

VAR = b"REPLCAST_TERMINAL="
ROUNDS = 5


def is_tag(value):
    return isinstance(value, str) and 0 < len(value) <= 64 and all(c in "0123456789abcdef" for c in value)


def session_of(stat):
    """The session id from a /proc/PID/stat line: the name in parentheses may hold anything, so the
    fields are counted after its last ')': state, ppid, pgrp, session."""
    return int(stat[stat.rindex(b")") + 2:].split()[3])


def processes(proc="/proc"):
    """{pid: (session, environment entries)} of the processes this user may read."""
    found = {}
    for name in os.listdir(proc):
        if not name.isdigit():
            continue
        try:
            with open("%s/%s/stat" % (proc, name), "rb") as f:
                sid = session_of(f.read())
            with open("%s/%s/environ" % (proc, name), "rb") as f:
                env = f.read().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile, or another user's
        found[int(name)] = (sid, env)
    return found


def targets(found, tag, me):
    """The pids to kill: those tagged, and every member of a session a tagged process leads."""
    entry = VAR + tag.encode()
    tagged = {pid for pid, (_, env) in found.items() if entry in env}
    led = {pid for pid in tagged if found[pid][0] == pid}
    return {pid for pid, (sid, _) in found.items() if pid in tagged or sid in led} - {me}


def kill(tag):
    killed = set()
    for _ in range(ROUNDS):
        now = targets(processes(), tag, os.getpid()) - killed
        if not now:
            break
        for pid in now:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                continue  # ended meanwhile, or not ours
            killed.add(pid)
    return len(killed)


def main(argv):
    if len(argv) != 3 or argv[1] != "kill" or not is_tag(argv[2]):
        sys.stdout.write(json.dumps({"error": "usage: terminal.py kill TAG (hex digits)"}) + "\n")
        return 2
    sys.stdout.write(json.dumps({"killed": kill(argv[2])}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
