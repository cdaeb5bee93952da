// The sandbox image's own Python suites (sandbox-image/tests), each Python test reported
// as one tap assertion: the REPL suite runs inside the built image under the DESIGN §6
// baseline flags, the Docker suite runs on the host against `docker run -i` of the image.
import t, { type Test } from 'tap'
import { spawn } from 'node:child_process'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import path from 'node:path'

const SANDBOX_IMAGE = process.env.SANDBOX_IMAGE ?? 'replcast-sandbox:latest'
const TESTS_DIR = fileURLToPath(new URL('../sandbox-image/tests/', import.meta.url))
const SUITE_TIMEOUT_MS = 540_000

// Same flags as sandbox-image/tests/harness.py DOCKER_BASELINE_FLAGS.
const BASELINE_FLAGS = [
  '--network', 'none',
  '--read-only',
  '--tmpfs', '/workspace:rw,size=64m,uid=1000,gid=1000,mode=0700',
  '--tmpfs', '/tmp:rw,size=64m,mode=1777',
  '--cap-drop', 'ALL',
  '--security-opt', 'no-new-privileges',
  '--pids-limit', '128',
  '--memory', '512m', '--memory-swap', '512m',
  '--cpus', '1',
  '--ulimit', 'nofile=1024:1024',
  '--init',
  '--user', '1000:1000',
]

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
async function runSuite(t: Test, command: string, args: string[]): Promise<void> {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] })
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

t.test('REPL suite inside the image (subprocess with pipes, baseline flags)', async (t) => {
  await runSuite(t, 'docker', [
    'run', '--rm', '--log-driver', 'none', ...BASELINE_FLAGS, SANDBOX_IMAGE,
    'python3', '/opt/replcast-tests/run.py', '--suite', 'pipe',
  ])
})

t.test('Docker suite against docker run -i of the image (host)', async (t) => {
  await runSuite(t, 'python3', [path.join(TESTS_DIR, 'run.py'), '--suite', 'docker'])
})
