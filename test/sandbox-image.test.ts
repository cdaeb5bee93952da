// The sandbox image's own Python suites (sandbox-image/tests), each Python test reported
// as one tap assertion: the REPL suite runs inside the built image, the Docker suite runs on
// the host against `docker run -i` of the image; both start it with the service's own flags.
import t, { type Test } from 'tap'
import { spawn } from 'node:child_process'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import path from 'node:path'
import { loadConfig } from '../src/config.js'
import { containerConfig } from '../src/sandbox/container-spec.js'
import { resolveSessionLimits, sandboxSpec } from '../src/sessions/supply/session-limits.js'
import { dockerRunFlags } from './helpers/docker-run-flags.js'

const SANDBOX_IMAGE = process.env.SANDBOX_IMAGE ?? 'replcast-sandbox:latest'
const TESTS_DIR = fileURLToPath(new URL('../sandbox-image/tests/', import.meta.url))
const SUITE_TIMEOUT_MS = 540_000

// The flags every sandbox gets, from the service's own container config for the default limits,
// under runc: the suites' expectations are the Linux kernel's (EROFS, NoNewPrivs in /proc, the pids
// cgroup). gVisor answers some of them its own way; hostile-runsc.test.ts holds runsc to the baseline.
// The runner inside the image is the container's command, so no stdin is attached to it.
const CONFIG = loadConfig({ SANDBOX_IMAGE, REPLCAST_API_KEYS: 'tests=unused-key' })
const SANDBOX_FLAGS = dockerRunFlags(
  containerConfig(
    sandboxSpec(CONFIG, {
      sessionId: 'ses_imagetests',
      tenant: 'tests',
      runtime: 'runc',
      limits: resolveSessionLimits(CONFIG, 'tests', {}).limits,
      env: {},
    }),
  ),
)
const SUITE_FLAGS = SANDBOX_FLAGS.filter((f) => f !== '--interactive')

interface PyTestLine {
  name: string
  status: 'pass' | 'fail' | 'error' | 'skip'
  duration_ms: number
  detail: string
}

interface Summary {
  pass: number
  fail: number
  error: number
  skip: number
  duration_s: number
}

/** Runs one Python suite runner and turns each JSON result line into a tap assertion. */
async function runSuite(t: Test, command: string, args: string[], env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], env })
  let stderr = ''
  child.stderr.setEncoding('utf8')
  child.stderr.on('data', (chunk: string) => {
    stderr = (stderr + chunk).slice(-20_000)
  })
  const timer = setTimeout(() => child.kill('SIGKILL'), SUITE_TIMEOUT_MS)
  const exited = new Promise<{ code: number | null; error?: Error }>((resolve) => {
    child.on('error', (error) => resolve({ code: null, error }))
    child.on('close', (code) => resolve({ code }))
  })
  let summary: Summary | undefined
  let reported = 0
  const lines = createInterface({ input: child.stdout })
  for await (const line of lines) {
    let parsed: unknown
    try {
      parsed = JSON.parse(line)
    } catch {
      t.comment(line)
      continue
    }
    if (parsed !== null && typeof parsed === 'object' && 'summary' in parsed) {
      summary = (parsed as { summary: Summary }).summary
      continue
    }
    const r = parsed as PyTestLine
    reported++
    if (r.status === 'skip') {
      t.pass(r.name, { skip: r.detail || true })
    } else if (r.status === 'pass') {
      t.pass(r.name)
    } else {
      t.fail(r.name, { status: r.status, duration_ms: r.duration_ms, detail: r.detail })
    }
  }
  const { code, error } = await exited
  clearTimeout(timer)
  t.notOk(error, `runner starts: ${command} ${args.slice(0, 3).join(' ')}`, { error: error?.message })
  t.ok(reported > 0 && summary !== undefined, 'runner reported results and a summary', { stderr: stderr.slice(-4000) })
  t.equal(code, 0, 'runner exits 0', { stderr: stderr.slice(-4000) })
  if (summary) t.comment(`${summary.pass} passed, ${summary.fail + summary.error} failed, ${summary.skip} skipped in ${summary.duration_s}s`)
}

t.test("the docker run flags are the service's container config", async (t) => {
  for (const flag of ['--read-only', '--init', '--interactive']) t.ok(SANDBOX_FLAGS.includes(flag), flag)
  const pairs = new Set(SANDBOX_FLAGS.map((f, i) => `${f} ${SANDBOX_FLAGS[i + 1]}`))
  for (const pair of ['--network none', '--cap-drop ALL', '--security-opt no-new-privileges', '--ipc private', '--log-driver local'])
    t.ok(pairs.has(pair), pair)
  t.ok(
    SANDBOX_FLAGS.some((f) => f.startsWith('/tmp:') && f.includes('noexec')),
    '/tmp is noexec',
  )
  t.throws(() => dockerRunFlags({ Image: 'x', HostConfig: { Privileged: false } }), /HostConfig\.Privileged/, 'an unmapped setting fails')
})

t.test('REPL suite inside the image (subprocess with pipes, the sandbox flags)', async (t) => {
  await runSuite(t, 'docker', ['run', '--rm', ...SUITE_FLAGS, SANDBOX_IMAGE, 'python3', '/opt/replcast-tests/run.py', '--suite', 'pipe'])
})

t.test('Docker suite against docker run -i of the image (host)', async (t) => {
  await runSuite(t, 'python3', [path.join(TESTS_DIR, 'run.py'), '--suite', 'docker'], {
    ...process.env,
    REPLCAST_TEST_DOCKER_FLAGS: JSON.stringify(SANDBOX_FLAGS),
  })
})
