# The baseline of issue 11: a bare local Jupyter kernel (Debian's python3-ipykernel) driven over ZMQ by
# jupyter_client, timing print(1) from execute_request to the kernel's `idle` status on iopub.
# Usage: /usr/bin/python3 bench/jupyter.py ROUNDS WARMUP  → one JSON line {"samples_ms": [...]} on stdout.
import json
import os
import sys
import time

from jupyter_client.manager import KernelManager


def run_once(kc, code):
    msg_id = kc.execute(code, store_history=False)
    saw_output = False
    while True:
        msg = kc.get_iopub_msg(timeout=30)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind = msg["msg_type"]
        if kind == "stream":
            saw_output = True
        elif kind == "status" and msg["content"]["execution_state"] == "idle":
            break
    # The shell reply comes with idle; drained so the next round does not find it.
    kc.get_shell_msg(timeout=30)
    if not saw_output:
        raise RuntimeError("no stream output from the kernel")


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    warmup = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    # Quiet the kernel's debugger start-up warnings (stderr noise, not a cost per execution).
    os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
    km = KernelManager(kernel_cmd=[sys.executable, "-Xfrozen_modules=off", "-m", "ipykernel_launcher", "-f", "{connection_file}"])
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        samples = []
        for i in range(rounds + warmup):
            t0 = time.perf_counter()
            run_once(kc, "print(1)")
            if i >= warmup:
                samples.append((time.perf_counter() - t0) * 1000)
        print(json.dumps({"samples_ms": samples}))
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


if __name__ == "__main__":
    main()
