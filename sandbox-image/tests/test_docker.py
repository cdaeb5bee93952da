"""The built image through `docker run -i` with the full DESIGN.md §6 baseline
flags (read-only root, tmpfs workspace, no network, no capabilities, limits,
tini as PID 1, uid 1000). Runs on the host; needs docker and the image."""

import unittest

import test_repl as base
from harness import docker_available, done_of, only, stream_text

DOCKER = docker_available()
SKIP_REASON = "docker or the sandbox image is not available"


@unittest.skipUnless(DOCKER, SKIP_REASON)
class DockerBaselineTests(base.ReplTestCase):
    target = "docker"

    def test_runs_unprivileged_in_the_workspace_on_a_read_only_root(self):
        frames = self.execute_ok(base.dedent("""
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

    def test_has_no_network_and_no_capabilities(self):
        frames = self.execute_ok(base.dedent("""
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
        frames = self.execute_ok(base.dedent("""
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

    def test_files_in_the_tmpfs_workspace(self):
        self.assertEqual(self.repl.request("file_put", path="in/a.txt", data="aGk=", offset=0)["size"], 2)
        self.assertEqual(self.eval_text("open('/workspace/in/a.txt').read()"), "'hi'")
        self.assertEqual(self.repl.request("file_get", path="in/a.txt")["data"], "aGk=")

    def test_workspace_fill_is_reported(self):
        frames = self.execute("open('big', 'wb').write(b'0' * (100 * 1024 * 1024))")
        self.assertEqual(only(frames, "error")[0]["ename"], "OSError")
        self.assertTrue(self.repl.request("file_delete", path="big")["ok"])

    def test_fork_bomb_is_contained_by_the_pids_limit(self):
        frames = self.execute(base.dedent("""
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

    def test_shutdown_stops_the_container(self):
        self.assertTrue(self.repl.request("shutdown")["ok"])
        self.assertEqual(self.repl.proc.wait(60), 0)


@unittest.skipUnless(DOCKER, SKIP_REASON)
class DockerOutputTests(base.OutputTests):
    target = "docker"


@unittest.skipUnless(DOCKER, SKIP_REASON)
class DockerInterruptTests(base.InterruptTests):
    target = "docker"


@unittest.skipUnless(DOCKER, SKIP_REASON)
class DockerStdinGarbageTests(base.StdinGarbageTests):
    target = "docker"


@unittest.skipUnless(DOCKER, SKIP_REASON)
class DockerStreamedExecutionTests(base.StreamedExecutionTests):
    target = "docker"


if __name__ == "__main__":
    unittest.main()
