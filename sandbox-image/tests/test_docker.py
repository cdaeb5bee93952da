"""The built image through `docker run -i`, started with the flags the API's
containerConfig() maps to (read-only root, tmpfs workspace and noexec /tmp, no
network, no capabilities, limits, private IPC, tini as PID 1, uid 1000, the
REPL's limits in the environment). Runs on the host; needs docker, the image
and REPLCAST_TEST_DOCKER_FLAGS (test/sandbox-image.test.ts sets it)."""

import unittest

# Modules, not classes: a TestCase class imported by name would run here a second time as a pipe test.
import test_interrupt_streams
import test_output
from harness import DOCKER_FLAGS, DOCKER_FLAGS_VAR, ReplTestCase, dedent, docker_available, flag_values, only, stream_text

DOCKER = docker_available() and DOCKER_FLAGS is not None
SKIP_REASON = ("docker or the sandbox image is not available" if DOCKER_FLAGS is not None else
               "%s is not set: run `npx tap test/sandbox-image.test.ts`, which derives it from "
               "containerConfig()" % DOCKER_FLAGS_VAR)


@unittest.skipUnless(DOCKER, SKIP_REASON)
class DockerBaselineTests(ReplTestCase):
    target = "docker"

    def test_runs_unprivileged_in_the_workspace_on_a_read_only_root(self):
        frames = self.execute_ok(dedent("""
            import os
            print(os.getuid(), os.getgid(), os.getcwd())
            for path in ('/etc/replcast-probe', '/opt/replcast/probe'):
                try:
                    open(path, 'w')
                    print('WRITABLE', path)
                except OSError as exc:
                    print('refused', exc.errno)
            open('/workspace/ok.txt', 'w').write('w')
            open('/tmp/ok.txt', 'w').write('t')
            print(open('/proc/1/comm').read().strip())
        """))
        lines = stream_text(frames).splitlines()
        self.assertEqual(lines[0], "1000 1000 /workspace")
        self.assertEqual(lines[1:3], ["refused 30", "refused 30"])  # EROFS
        self.assertIn(lines[3], ("tini", "docker-init"))

    def test_ready_reports_the_limits_the_host_passed(self):
        given = dict(e.split("=", 1) for e in flag_values(DOCKER_FLAGS, "--env") if e.startswith("REPLCAST_MAX_"))
        self.assertEqual(sorted(given), ["REPLCAST_MAX_FRAME_BYTES", "REPLCAST_MAX_IMAGE_BYTES",
                                         "REPLCAST_MAX_PROMPT_CHARS", "REPLCAST_MAX_STREAM_BYTES"])
        limits = self.repl.ready["limits"]
        for name, value in given.items():
            self.assertEqual(limits[name[len("REPLCAST_"):].lower()], int(value), name)
        # The container's environment has them: equal values are not the REPL's fallbacks by coincidence.
        text = self.eval_text("sorted((k, v) for k, v in __import__('os').environ.items() if k.startswith('REPLCAST_MAX_'))")
        self.assertEqual(eval(text), sorted(given.items()))

    def test_tmp_is_noexec_and_shared_memory_is_bounded(self):
        frames = self.execute_ok(dedent("""
            import os, subprocess
            open('/tmp/x.sh', 'w').write('#!/bin/sh\\necho ran\\n')
            os.chmod('/tmp/x.sh', 0o755)
            try:
                subprocess.run(['/tmp/x.sh'])
            except PermissionError:
                print('noexec')
            st = os.statvfs('/dev/shm')
            print(st.f_blocks * st.f_frsize)
        """))
        lines = stream_text(frames).splitlines()
        self.assertEqual(lines[0], "noexec")
        self.assertEqual(int(lines[1]), int(flag_values(DOCKER_FLAGS, "--shm-size")[0]))

    def test_has_no_network_and_no_capabilities(self):
        frames = self.execute_ok(dedent("""
            import socket, os
            print(sorted(name for _, name in socket.if_nameindex()))
            try:
                socket.create_connection(('1.1.1.1', 53), timeout=3)
                print('CONNECTED')
            except OSError:
                print('no route')
            print([l for l in open('/proc/self/status') if l.startswith(('CapEff', 'NoNewPrivs'))])
        """))
        out = stream_text(frames)
        self.assertIn("['lo']", out)
        self.assertIn("no route", out)
        self.assertIn("CapEff:\\t0000000000000000", out)
        self.assertIn("NoNewPrivs:\\t1", out)

    def test_scientific_stack_imports_and_matplotlib_uses_the_baked_font_cache(self):
        frames = self.execute_ok(dedent("""
            import time
            t = time.monotonic()
            import numpy, pandas, scipy, sympy, PIL, matplotlib.pyplot as plt
            plt.plot([1, 2, 3])
            print('imported')
        """), timeout=120)
        self.assertIn("imported", stream_text(frames))
        self.assertNotIn("font cache", stream_text(frames))
        self.assertNotIn("temporary cache directory", stream_text(frames))
        display = only(frames, "display")
        self.assertEqual(len(display), 1)
        self.assertEqual(self.eval_text("sympy.sqrt(8)"), "2*sqrt(2)")

    def test_workspace_fill_is_reported(self):
        frames = self.execute(dedent("""
            import os
            st = os.statvfs('/workspace')
            with open('big', 'wb') as f:
                for _ in range(st.f_blocks * st.f_frsize // (1 << 20) + 2):
                    f.write(b'0' * (1 << 20))
        """), timeout=120)
        self.assertEqual(only(frames, "error")[0]["ename"], "OSError")
        self.assertIn("No space left", only(frames, "error")[0]["evalue"])
        self.execute_ok("os.remove('big')")

    def test_fork_bomb_is_contained_by_the_pids_limit(self):
        frames = self.execute(dedent("""
            import os
            children = []
            try:
                for _ in range(1000):
                    pid = os.fork()
                    if pid == 0:
                        import time
                        time.sleep(30)
                        os._exit(0)
                    children.append(pid)
            except OSError as exc:
                print('fork refused after', len(children))
            finally:
                for pid in children:
                    os.kill(pid, 9)
                    os.waitpid(pid, 0)
        """), timeout=120)
        self.assertIn("fork refused after", stream_text(frames))
        self.assertEqual(self.eval_text("'alive'"), "'alive'")

    def test_closing_stdin_stops_the_container(self):
        self.assertEqual(self.eval_text("'up'"), "'up'")
        self.repl.proc.stdin.close()
        self.assertEqual(self.repl.proc.wait(60), 0)


@unittest.skipUnless(DOCKER, SKIP_REASON)
class DockerOutputTests(test_output.OutputTests):
    target = "docker"


@unittest.skipUnless(DOCKER, SKIP_REASON)
class DockerInterruptTests(test_interrupt_streams.InterruptTests):
    target = "docker"


@unittest.skipUnless(DOCKER, SKIP_REASON)
class DockerStdinGarbageTests(test_interrupt_streams.StdinGarbageTests):
    target = "docker"


@unittest.skipUnless(DOCKER, SKIP_REASON)
class DockerStreamedExecutionTests(test_interrupt_streams.StreamedExecutionTests):
    target = "docker"


if __name__ == "__main__":
    unittest.main()
