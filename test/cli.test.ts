// The `replcast` CLI as a user runs it: a child process (`node clients/typescript/bin/replcast.js`,
// the root package's bin) against a live server. Output order and timing, exit codes, code from a
// file, stdin and -c (as python takes it), Ctrl+C as an interrupt, the interactive console, sessions ls/rm,
// files put/get/ls/rm, bash scripts and one-shots.
import t from 'tap'
import { execFile, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { readFile, writeFile } from 'node:fs/promises'
import { promisify } from 'node:util'
import { fileURLToPath } from 'node:url'
import { API_KEY, startApp } from './helpers/app.js'
import { api, createSession } from './helpers/client.js'
import { CLI_BIN, cliEnv } from './helpers/cli.js'
import { waitFor } from './helpers/wait.js'

interface Chunk {
  stream: 'out' | 'err'
  text: string
  at: number
}

interface Cli {
  child: ChildProcessWithoutNullStreams
  chunks: Chunk[]
  stdout: () => string
  stderr: () => string
  exited: Promise<number | null>
}

function cli(url: string, args: string[], opts: { stdin?: string; key?: string | null } = {}): Cli {
  const env = cliEnv(url, opts.key === null ? '' : (opts.key ?? API_KEY))
  const child = spawn(process.execPath, [CLI_BIN, ...args], { env, stdio: ['pipe', 'pipe', 'pipe'] })
  const chunks: Chunk[] = []
  child.stdout.on('data', (b: Buffer) => chunks.push({ stream: 'out', text: b.toString(), at: performance.now() }))
  child.stderr.on('data', (b: Buffer) => chunks.push({ stream: 'err', text: b.toString(), at: performance.now() }))
  if (opts.stdin !== undefined) child.stdin.end(opts.stdin)
  const join = (s: 'out' | 'err') => () =>
    chunks
      .filter((c) => c.stream === s)
      .map((c) => c.text)
      .join('')
  return { child, chunks, stdout: join('out'), stderr: join('err'), exited: new Promise((resolve) => child.on('close', (code) => resolve(code))) }
}

/** Resolves once `pred` holds for the output so far (checked as output arrives). */
const until = (c: Cli, pred: () => boolean) => waitFor(pred, 30000, 10)

t.test('`npx replcast` in the clone runs this CLI (the root package.json bin)', async (t) => {
  const env = { ...process.env }
  delete env.NODE_OPTIONS
  const root = fileURLToPath(new URL('..', import.meta.url))
  const { stdout } = await promisify(execFile)('npx', ['--no-install', 'replcast', '--help'], { cwd: root, env })
  t.match(stdout, /^replcast: run Python in replcast sandboxes/)
})

t.test('the replcast CLI', async (t) => {
  const h = await startApp(t)
  const sessionsNow = async () => (await api(h.url, 'GET', '/v1/sessions')).body.sessions.length as number

  t.test('run streams output live, in order, and exits 0', async (t) => {
    const c = cli(h.url, ['run', '-c', 'import time\nprint("first", flush=True)\ntime.sleep(1.5)\nprint("second")\n6 * 7'])
    t.equal(await c.exited, 0, c.stderr())
    t.equal(c.stdout(), 'first\nsecond\n42\n')
    const first = c.chunks.find((x) => x.text.includes('first'))!
    const second = c.chunks.find((x) => x.text.includes('second'))!
    t.notOk(first.text.includes('second'), 'the first line arrived on its own')
    t.ok(second.at - first.at >= 1000, `the first line was printed while the code slept (${Math.round(second.at - first.at)} ms earlier)`)
    t.equal(await sessionsNow(), 0, 'the session it made is deleted')
  })

  t.test('exit codes follow the execution status; tracebacks go to stderr', async (t) => {
    const err = cli(h.url, ['run', '-c', 'def f():\n    raise ValueError("boom")\nf()'])
    t.equal(await err.exited, 1)
    t.match(err.stderr(), /Traceback[\s\S]*ValueError: boom/)
    t.equal(err.stdout(), '')
    const timeout = cli(h.url, ['run', '--timeout', '1', '-c', 'import time\ntime.sleep(30)'])
    t.equal(await timeout.exited, 124)
    t.match(timeout.stderr(), /timeout/)
    const usage = cli(h.url, ['run', '--timeout', 'soon', '-c', '1'])
    t.equal(await usage.exited, 2)
    const refused = cli(h.url, ['run', '-c', '1'], { key: 'wrong-key' })
    t.equal(await refused.exited, 3)
    t.match(refused.stderr(), /unauthorized/)
    const nokey = cli(h.url, ['run', '-c', '1'], { key: null })
    t.equal(await nokey.exited, 2)
    t.match(nokey.stderr(), /REPLCAST_API_KEY/)
  })

  t.test('the code comes as python takes it: FILE, - (stdin), -c CODE, or stdin when none is given', async (t) => {
    const dir = t.testdir({ 'job.py': 'import sys\nfor i in range(3):\n    print(i)\n', 'job.sh': 'echo "from $0"; exit 6\n' })
    const fromFile = cli(h.url, ['run', `${dir}/job.py`])
    t.equal(await fromFile.exited, 0, fromFile.stderr())
    t.equal(fromFile.stdout(), '0\n1\n2\n', 'run FILE runs the file')
    const dash = cli(h.url, ['run', '-'], { stdin: 'print(6 * 7)\n' })
    t.equal(await dash.exited, 0)
    t.equal(dash.stdout(), '42\n', 'run - reads stdin')
    const piped = cli(h.url, ['run'], { stdin: 'import sys\nprint(sum(range(5)))\nprint("to err", file=sys.stderr)\n' })
    t.equal(await piped.exited, 0)
    t.equal(piped.stdout(), '10\n', 'nothing given, stdin not a terminal: stdin')
    t.equal(piped.stderr(), 'to err\n')
    const inline = cli(h.url, ['run', '-c', 'print("inline")'])
    t.equal(await inline.exited, 0)
    t.equal(inline.stdout(), 'inline\n', 'run -c CODE runs CODE')

    const bashFile = cli(h.url, ['run', '--bash', `${dir}/job.sh`])
    t.equal(await bashFile.exited, 6, 'run --bash FILE: the script exit code')
    t.match(bashFile.stdout(), /^from /)
    const bashDash = cli(h.url, ['run', '--bash', '-'], { stdin: 'echo piped; exit 2\n' })
    t.equal(await bashDash.exited, 2)
    t.equal(bashDash.stdout(), 'piped\n', 'run --bash - reads the script from stdin')
    const bashInline = cli(h.url, ['run', '--bash', '-c', 'echo $((6 * 7))'])
    t.equal(await bashInline.exited, 0)
    t.equal(bashInline.stdout(), '42\n', 'run --bash -c CODE')

    const missing = cli(h.url, ['run', 'print(1)'])
    t.equal(await missing.exited, 2, 'a FILE that is not there is a usage mistake, never run as code')
    t.match(missing.stderr(), /cannot read print\(1\): ENOENT.*use -c/)
    const extra = cli(h.url, ['run', `${dir}/job.py`, 'more'])
    t.equal(await extra.exited, 2)
    t.match(extra.stderr(), /one FILE at a time/)
    const both = cli(h.url, ['run', '-c', '1', `${dir}/job.py`])
    t.equal(await both.exited, 2)
    t.match(both.stderr(), /-c takes the whole code/)
    t.equal(await sessionsNow(), 0, 'no session was left')
  })

  t.test('SIGINT interrupts the running code and exits 130', async (t) => {
    const c = cli(h.url, ['run', '-c', 'import time\nprint("started", flush=True)\ntime.sleep(60)'])
    t.ok(await until(c, () => c.stdout().includes('started')))
    const sent = performance.now()
    c.child.kill('SIGINT')
    t.equal(await c.exited, 130)
    t.ok(performance.now() - sent < 15000, 'it ended long before the code would have')
    t.match(c.stderr(), /KeyboardInterrupt/)
    t.equal(await sessionsNow(), 0, 'the session is deleted after the interrupt too')
  })

  t.test('--session runs in an existing session and keeps it', async (t) => {
    const sid = await createSession(h.url)
    t.equal(await cli(h.url, ['run', '-s', sid, '-c', 'x = 41']).exited, 0)
    const c = cli(h.url, ['run', '-s', sid, '-c', 'print(x + 1)'])
    t.equal(await c.exited, 0)
    t.equal(c.stdout(), '42\n', 'state is kept between runs')
    t.equal((await api(h.url, 'GET', `/v1/sessions/${sid}`)).status, 200)

    const ls = cli(h.url, ['sessions', 'ls'])
    t.equal(await ls.exited, 0)
    t.match(ls.stdout(), new RegExp(`^ID\\s+STATUS[\\s\\S]*${sid}\\s+ready`))
    const rm = cli(h.url, ['sessions', 'rm', sid])
    t.equal(await rm.exited, 0)
    t.equal((await api(h.url, 'GET', `/v1/sessions/${sid}`)).status, 404)
    const again = cli(h.url, ['sessions', 'rm', sid])
    t.equal(await again.exited, 3)
    t.match(again.stderr(), /session_not_found/)
  })

  t.test('repl: multi-line input, state across statements, Ctrl+C interrupts and the console goes on', async (t) => {
    const c = cli(h.url, ['repl'])
    const input = c.child.stdin
    input.write('x = 5\ndef double(a):\n    return a * 2\n\nprint(double(x))\n')
    t.ok(await until(c, () => c.stdout().includes('10\n')), 'a block ended by an empty line, then a call using it')
    input.write('import time\nprint("sleeping", flush=True); time.sleep(60)\n')
    t.ok(await until(c, () => c.stdout().includes('sleeping')))
    c.child.kill('SIGINT')
    t.ok(await until(c, () => c.stderr().includes('KeyboardInterrupt')), 'the running statement was interrupted')
    input.write('for i in range(2):\n    print("loop", i)\nprint(x)\n')
    input.end()
    t.equal(await c.exited, 0)
    t.match(c.stdout(), /10\nsleeping\nloop 0\nloop 1\n5\n$/, 'a block without an empty line ends at the next unindented line; x survived')
    t.equal(await sessionsNow(), 0, 'leaving deletes the session')
  })

  t.test('files put, ls, get and rm: a round trip byte for byte', async (t) => {
    const sid = await createSession(h.url)
    const dir = t.testdir()
    const blob = randomBytes(300_000)
    await writeFile(`${dir}/blob.bin`, blob)
    const put = cli(h.url, ['files', 'put', `${dir}/blob.bin`, 'data/blob.bin', '-s', sid])
    t.equal(await put.exited, 0, put.stderr())
    t.equal(put.stdout(), 'created data/blob.bin (300000 bytes)\n')
    const piped = cli(h.url, ['files', 'put', '-', 'notes.txt', '--session', sid], { stdin: 'from stdin\n' })
    t.equal(await piped.exited, 0, piped.stderr())
    const ls = cli(h.url, ['files', 'ls', '-r', '-s', sid])
    t.equal(await ls.exited, 0)
    t.match(ls.stdout(), /^ +- {2}\S+ {2}data\/\n300000 {2}\S+ {2}data\/blob\.bin\n +11 {2}\S+ {2}notes\.txt\n$/, 'size, time, path; folders end in /')
    const get = cli(h.url, ['files', 'get', 'data/blob.bin', `${dir}/back.bin`, '-s', sid])
    t.equal(await get.exited, 0, get.stderr())
    t.same(await readFile(`${dir}/back.bin`), blob, 'the downloaded file is the uploaded one')
    const cat = cli(h.url, ['files', 'get', 'notes.txt', '-', '-s', sid])
    t.equal(await cat.exited, 0)
    t.equal(cat.stdout(), 'from stdin\n', "'-' writes the file to stdout")
    const dirRm = cli(h.url, ['files', 'rm', 'data', '-s', sid])
    t.equal(await dirRm.exited, 3)
    t.match(dirRm.stderr(), /is_a_directory/)
    t.equal(await cli(h.url, ['files', 'rm', '-r', 'data', 'notes.txt', '-s', sid]).exited, 0)
    const missing = cli(h.url, ['files', 'get', 'notes.txt', `${dir}/gone.txt`, '-s', sid])
    t.equal(await missing.exited, 3)
    t.match(missing.stderr(), /file_not_found/)
    await t.rejects(readFile(`${dir}/gone.txt`), 'no file is left behind for a failed download')
    const noSession = cli(h.url, ['files', 'ls'])
    t.equal(await noSession.exited, 2)
    t.match(noSession.stderr(), /--session/)
    await api(h.url, 'DELETE', `/v1/sessions/${sid}`)
  })

  t.test('run --bash exits with the script exit code; --once runs without a session', async (t) => {
    const bash = cli(h.url, ['run', '--bash', '-c', 'echo hi; echo oops >&2; exit 7'])
    t.equal(await bash.exited, 7)
    t.equal(bash.stdout(), 'hi\n')
    t.equal(bash.stderr(), 'oops\n')
    t.equal(await cli(h.url, ['run', '--bash', '-c', 'test -d /workspace']).exited, 0)
    const once = cli(h.url, ['run', '--once', '-c', 'import os\nprint(os.listdir("."))'])
    t.equal(await once.exited, 0, once.stderr())
    t.equal(once.stdout(), '[]\n')
    const onceBash = cli(h.url, ['run', '--once', '--bash'], { stdin: 'echo $((6 * 7)); exit 4\n' })
    t.equal(await onceBash.exited, 4)
    t.equal(onceBash.stdout(), '42\n')
    const raised = cli(h.url, ['run', '--once', '-c', '1 / 0'])
    t.equal(await raised.exited, 1)
    t.match(raised.stderr(), /ZeroDivisionError/)
    t.equal(await cli(h.url, ['run', '--once', '--session', 'ses_AAAAAAAAAAAAAAAAAAAA', '-c', '1']).exited, 2)
    t.ok(await waitFor(async () => (await sessionsNow()) === 0), 'nothing is left')
  })
})
