// The Python client (clients/python) as a user gets it: installed with pip into a fresh virtualenv
// (system site packages: Debian's python3-httpx and python3-pytest; no index), then its own pytest
// suite run against a live server. Each pytest test is one assertion here, under its own name, so
// npm test counts them and a failing one fails with its name and message.
import t from 'tap'
import { execFile } from 'node:child_process'
import { cp, mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { API_KEY, OTHER_KEY, startApp } from './helpers/app.js'
import { checkpointEngineHost } from './helpers/hibernation.js'

const run = promisify(execFile)
const root = fileURLToPath(new URL('..', import.meta.url))
const pkgDir = join(root, 'clients/python')
// Debian's interpreter, whose packages the virtualenv sees (a python3 earlier on PATH may be another).
const PYTHON = '/usr/bin/python3'
const RATE_KEY = 'test-key-gamma-0003'
const PROCS_KEY = 'test-key-delta-0004'

interface Case {
  name: string
  outcome: 'passed' | 'failed' | 'skipped'
  message: string
}

const unescape = (s: string) =>
  s
    .replace(/&#(\d+);/g, (_, n: string) => String.fromCodePoint(Number(n)))
    .replace(/&quot;/g, '"')
    .replace(/&apos;/g, "'")
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&')

/** The test cases of pytest's JUnit XML report, each with its outcome and, when it did not pass, why. */
function junitCases(xml: string): Case[] {
  const cases: Case[] = []
  for (const m of xml.matchAll(/<testcase\b([^>]*?)(?:\/>|>([\s\S]*?)<\/testcase>)/g)) {
    const attr = (name: string) => unescape(new RegExp(`\\b${name}="([^"]*)"`).exec(m[1]!)?.[1] ?? '')
    const body = m[2] ?? ''
    const problem = /<(failure|error|skipped)\b([^>]*?)(?:\/>|>([\s\S]*?)<\/\1>)/.exec(body)
    const outcome = !problem ? 'passed' : problem[1] === 'skipped' ? 'skipped' : 'failed'
    const message = problem ? unescape(`${/message="([^"]*)"/.exec(problem[2]!)?.[1] ?? ''}\n${problem[3] ?? ''}`).trim() : ''
    cases.push({ name: `${attr('classname')}::${attr('name')}`, outcome, message })
  }
  return cases
}

t.test('the Python client: pip install into a virtualenv, then its pytest suite against the server', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'replcast-python-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const h = await startApp(t, {
    // test_hibernate.py: runsc sessions hibernate, so the engine must checkpoint; runc stays the default.
    DOCKER_HOST: await checkpointEngineHost(),
    CHECKPOINT_DIR: join(dir, 'checkpoints'),
    REPLCAST_API_KEYS: `alpha=${API_KEY},beta=${OTHER_KEY},gamma=${RATE_KEY},delta=${PROCS_KEY}`,
    // test_errors.py: beta may hold one session (quota_exceeded), gamma send three requests a minute (rate_limited);
    // test_processes.py: delta's sessions run two background processes at most (too_many_processes).
    REPLCAST_TENANT_LIMITS: JSON.stringify({ beta: { max_sessions: 1 }, gamma: { rate_per_min: 3 }, delta: { max_processes: 2 } }),
    // test_errors.py and test_async.py fill a session's queue: one running, one waiting.
    EXEC_QUEUE_DEPTH: '1',
  })

  // A copy is installed, so that the build's files (build/, *.egg-info) stay out of the repository.
  await cp(pkgDir, join(dir, 'src'), { recursive: true, filter: (f) => !/(__pycache__|\.egg-info|[/\\]build)$/.test(f) })
  await run(PYTHON, ['-m', 'venv', '--system-site-packages', join(dir, 'venv')])
  const python = join(dir, 'venv/bin/python')
  await run(python, ['-m', 'pip', 'install', '--quiet', '--no-build-isolation', '--no-index', '--disable-pip-version-check', join(dir, 'src')])
  const { stdout: where } = await run(python, ['-c', 'import replcast; print(replcast.__file__)'], { cwd: dir })
  t.ok(where.startsWith(join(dir, 'venv')), 'the tests import the installed package, not the sources')

  const report = join(dir, 'junit.xml')
  const env: Record<string, string | undefined> = {
    ...process.env,
    REPLCAST_URL: h.url,
    REPLCAST_API_KEY: API_KEY,
    REPLCAST_QUOTA_KEY: OTHER_KEY,
    REPLCAST_RATE_KEY: RATE_KEY,
    REPLCAST_PROCS_KEY: PROCS_KEY,
    PYTHONDONTWRITEBYTECODE: '1',
  }
  delete env.PYTHONPATH
  const pytest = await run(python, ['-m', 'pytest', '-p', 'no:cacheprovider', '-q', `--junitxml=${report}`, 'tests'], {
    cwd: pkgDir,
    env,
    maxBuffer: 64 * 1024 * 1024,
  }).then(
    (r) => ({ code: 0, ...r }),
    (err: { code?: number | string; stdout?: string; stderr?: string }) => ({
      code: typeof err.code === 'number' ? err.code : -1,
      stdout: err.stdout ?? '',
      stderr: err.stderr ?? '',
    }),
  )
  const xml = await readFile(report, 'utf8').catch(() => '')
  const cases = junitCases(xml)
  t.ok(cases.length >= 30, `pytest ran the suite (${cases.length} tests)`, { output: pytest.stdout.slice(-4000) + pytest.stderr.slice(-4000) })
  for (const c of cases) {
    // A skip here would mean the server or a key did not reach pytest: it counts as a failure.
    if (c.outcome === 'passed') t.pass(c.name)
    else t.fail(`${c.name} ${c.outcome}`, { diagnostic: true, failure: c.message.slice(0, 6000) })
  }
  t.equal(pytest.code, cases.some((c) => c.outcome === 'failed') ? 1 : 0, 'pytest exited as its tests went')
})
