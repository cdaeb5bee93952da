// Workspace files against a sandbox that stops its file program (SIGSTOP: it runs as the sandbox's
// user) at each phase: before it says ready, in the middle of an upload, after an upload's commit,
// in the middle of a download. Every request answers (a download is cut) within the stall deadline,
// and neither the program nor its Docker exec is left behind. And a sparse file far larger than
// the workspace is refused from its size, before a byte of it moves.
import t, { type Test } from 'tap'
import { randomBytes } from 'node:crypto'
import { request } from 'node:http'
import Docker from 'dockerode'
import { API_KEY, startApp } from './helpers/app.js'
import { createSession, readSse } from './helpers/client.js'
import { fileRequest, fileUrl, getFile, LIST_PROCESSES, putFile, python } from './helpers/files.js'
import { callTool, connectMcp, textOf } from './helpers/mcp.js'
import { containerOf } from './helpers/sandbox-signal.js'
import { waitFor } from './helpers/wait.js'

const STALL_MS = 2000
/** Room for the exec's start and a loaded machine on top of the deadline. */
const SLACK_MS = 4000
const MIB = 1024 * 1024

/**
 * Sandbox code that stops the first file program whose argument holds every `match` once `ready`
 * (Python, of its pid `p`) holds, and prints 'stopped <temporary uploads there were then>'. It reads
 * /proc, as any code can. An upload's temporary file is made just before the program says ready.
 */
const stopper = (match: string[], ready: string) => `import os, signal, time
MATCH = [m.encode() for m in ${JSON.stringify(match)}]
def written(pid):
    with open(f'/proc/{pid}/io') as f:
        return int(next(l for l in f if l.startswith('wchar')).split()[1])
def uploads():
    return [os.path.join(d, n) for d, _, ns in os.walk('/workspace') for n in ns if n.startswith('.replcast-upload-')]
def uploaded():
    return sum(os.path.getsize(f) for f in uploads())
def waiting(pid):
    with open(f'/proc/{pid}/stat') as f:
        return f.read().rsplit(')', 1)[1].split()[0] == 'S'
def hunt():
    end = time.time() + 60
    while time.time() < end:
        for p in os.listdir('/proc'):
            try:
                with open(f'/proc/{p}/cmdline', 'rb') as f:
                    argv = f.read().split(b'\\0')
                if len(argv) > 2 and argv[-3].endswith(b'fileio.py') and all(m in argv[-2] for m in MATCH) and (${ready}):
                    os.kill(int(p), signal.SIGSTOP)
                    return len(uploads())
            except (OSError, ValueError):
                pass
print('watching', flush=True)
print('stopped', hunt(), flush=True)`

/** Runs `code` in the session; `stdout(text)` resolves with its stdout once it holds `text`. */
async function follow(base: string, sid: string, code: string) {
  const res = await fetch(`${base}/v1/sessions/${sid}/executions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({ code, timeout_s: 90 }),
  })
  let out = ''
  const done = readSse(res, (e) => {
    if (e.event === 'stdout') out += e.data.text
    return e.event === 'done'
  })
  const stdout = async (text: string) => {
    const ended = await Promise.race([waitFor(() => out.includes(text), 60_000), done.then(() => out.includes(text))])
    if (!ended) throw new Error(`the sandbox code never printed ${text}: ${out}`)
    return out
  }
  return { stdout, done }
}

/** The file programs' kill runs Docker started in the container since `since` (ms). */
async function killsSince(containerId: string, since: number): Promise<number> {
  const events = (await new Docker().getEvents({
    since: (since / 1000).toFixed(3),
    until: String(Math.ceil(Date.now() / 1000) + 1),
    filters: { container: [containerId], event: ['exec_create'] },
  } as object)) as unknown as AsyncIterable<Buffer>
  let text = ''
  for await (const chunk of events) text += chunk.toString()
  return text.split('\n').filter((l) => l && (JSON.parse(l) as { Action: string }).Action.includes('"op":"kill"')).length
}

/** The temporary uploads there were when the program was stopped, from the stopper's line. */
const uploadsOf = (out: string) => Number(/stopped (\d+)/.exec(out)?.[1])

t.test('a file program stopped by sandbox code holds nothing', async (t) => {
  const h = await startApp(t, { SANDBOX_POOL_SIZE: '0', FILE_STALL_TIMEOUT_MS: String(STALL_MS) })
  const sid = await createSession(h.url)
  const container = await containerOf(sid)
  const docker = new Docker()
  const bound = STALL_MS + SLACK_MS
  const leftovers = `${LIST_PROCESSES}
print(sum(b'fileio.py' in c for c in procs), sum(n.startswith('.replcast-upload-') for _, _, ns in os.walk('.') for n in ns))`
  /** Running Docker execs of the file program in the sandbox. */
  const runningExecs = async () => {
    const ids = (await container.inspect()).ExecIDs ?? []
    const execs = await Promise.all(ids.map((id) => docker.getExec(id).inspect()))
    return execs.filter((e) => e.Running && e.ProcessConfig.arguments.some((a) => a.endsWith('fileio.py'))).length
  }
  /** Checks what a phase begun at `since` (ms) left: the stopped program killed once, nothing else. */
  const nothingLeft = async (t: Test, since: number) => {
    t.ok(await waitFor(async () => (await runningExecs()) === 0, bound), 'no Docker exec of the file program still runs')
    t.ok(await waitFor(async () => (await python(h.url, sid, leftovers)) === '0 0\n', bound), 'no file program and no temporary upload is left in the sandbox')
    t.equal(await killsSince(container.id, since), 1, 'the stopped program was killed, once')
    const check = randomBytes(1000)
    t.ok([200, 201].includes((await putFile(h.url, sid, 'check.bin', check)).status), 'uploads work')
    t.ok((await getFile(h.url, sid, 'check.bin')).bytes.equals(check), 'and downloads')
  }
  /** `p`'s value and how long it took; past 45 s it fails (a request that would wait for ever). */
  const timed = async <T>(p: Promise<T>) => {
    const t0 = performance.now()
    let timer: NodeJS.Timeout | undefined
    const never = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('no end within 45 s')), 45_000)))
    try {
      return { value: await Promise.race([p, never]), ms: performance.now() - t0 }
    } finally {
      clearTimeout(timer)
    }
  }

  t.test('stopped before it said ready: 503 within the deadline', async (t) => {
    const since = Date.now()
    const stop = await follow(h.url, sid, stopper(['"op":"put"', 'before.txt'], 'True'))
    await stop.stdout('watching')
    const { value: r, ms } = await timed(putFile(h.url, sid, 'before.txt', 'hello'))
    t.equal(`${r.status} ${r.json?.code}`, '503 unavailable')
    t.ok(ms < bound, `answered in ${Math.round(ms)} ms`)
    t.equal(uploadsOf(await stop.stdout('stopped')), 0, 'the program had not made its temporary file yet: it had not said ready')
    await stop.done
    await nothingLeft(t, since)
    t.match(await getFile(h.url, sid, 'before.txt'), { status: 404 }, 'nothing was written')
  })

  t.test('stopped in the middle of an upload: 503 within the deadline', async (t) => {
    const since = Date.now()
    const stop = await follow(h.url, sid, stopper(['"op":"put"', 'mid.bin'], 'uploaded() >= (1 << 20)'))
    await stop.stdout('watching')
    let sent = 0
    const body = new ReadableStream<Uint8Array>({
      pull(c) {
        if (sent >= 64 * MIB) return c.close()
        sent += 256 * 1024
        c.enqueue(randomBytes(256 * 1024))
      },
    })
    const answer = fileRequest('PUT', fileUrl(h.url, sid, 'mid.bin'), body)
    await stop.stdout('stopped')
    const { value: r, ms } = await timed(answer)
    t.equal(`${r.status} ${r.json?.code}`, '503 unavailable')
    t.ok(ms < bound, `answered ${Math.round(ms)} ms after the stop`)
    await stop.done
    await nothingLeft(t, since)
    t.match(await getFile(h.url, sid, 'mid.bin'), { status: 404 }, 'nothing was committed')
  })

  t.test('stopped after the commit, before its answer: 503 within the deadline', async (t) => {
    const since = Date.now()
    // Stopped once it said ready (it waits for the body: its temporary file is made, and it sleeps);
    // the body goes out only then, whole, with its commit frame.
    const stop = await follow(h.url, sid, stopper(['"op":"put"', 'commit.txt'], 'uploads() and waiting(p)'))
    await stop.stdout('watching')
    const url = new URL(fileUrl(h.url, sid, 'commit.txt'))
    const req = request({
      host: url.hostname,
      port: url.port,
      method: 'PUT',
      path: url.pathname,
      headers: { authorization: `Bearer ${API_KEY}`, 'content-length': 5 },
    })
    const answer = new Promise<{ status: number; body: string }>((resolve, reject) => {
      req.on('response', (res) => {
        let body = ''
        res.on('data', (b: Buffer) => (body += b.toString()))
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }))
      })
      req.on('error', reject)
    })
    req.flushHeaders()
    t.equal(uploadsOf(await stop.stdout('stopped')), 1, 'the program had said ready')
    req.end('hello')
    const { value: r, ms } = await timed(answer)
    t.equal(`${r.status} ${JSON.parse(r.body).code}`, '503 unavailable')
    t.ok(ms < bound, `answered ${Math.round(ms)} ms after the body was sent`)
    await stop.done
    await nothingLeft(t, since)
  })

  t.test('stopped in the middle of a download: the response is cut within the deadline', async (t) => {
    const since = Date.now()
    const data = randomBytes(48 * MIB)
    t.equal((await putFile(h.url, sid, 'down.bin', data)).status, 201)
    const stop = await follow(h.url, sid, stopper(['"op":"get"', 'down.bin'], 'written(p) >= (1 << 20)'))
    await stop.stdout('watching')
    const res = await fetch(fileUrl(h.url, sid, 'down.bin'), { headers: { authorization: `Bearer ${API_KEY}` } })
    t.equal(res.headers.get('content-length'), String(data.length))
    let got = 0
    const reading = (async () => {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) got += chunk.length
    })()
    reading.catch(() => undefined)
    await stop.stdout('stopped')
    const { value: cut, ms } = await timed(
      reading.then(
        () => null,
        (err: unknown) => err,
      ),
    )
    t.ok(cut instanceof Error, 'the body ends in an error, not as if the file were whole')
    t.ok(ms < bound, `cut ${Math.round(ms)} ms after the stop`)
    t.ok(got < data.length, `${got} of ${data.length} bytes came`)
    await stop.done
    await nothingLeft(t, since)
  })
})

t.test('a sparse file larger than the workspace is refused from its size, without streaming', async (t) => {
  const h = await startApp(t, { SANDBOX_POOL_SIZE: '0' })
  const sid = await createSession(h.url, { limits: { workspace_mb: 8 } })
  const since = Date.now()
  await python(h.url, sid, "open('/workspace/sparse.bin', 'wb').truncate(1 << 34)\nopen('/workspace/fits.bin', 'wb').write(b'x' * 1000)")
  const t0 = performance.now()
  const r = await getFile(h.url, sid, 'sparse.bin')
  const ms = performance.now() - t0
  t.equal(`${r.status} ${r.json?.code}`, '413 file_too_large')
  t.match(r.headers.get('content-type'), /^application\/problem\+json/)
  t.match(r.json, { size: 2 ** 34, maximum: 8 * MIB, detail: /sparse\.bin is 17179869184 bytes .*limits\.workspace_mb = 8 MiB/ })
  t.ok(ms < 1000, `answered in ${Math.round(ms)} ms`)
  const mcp = await connectMcp(h.url, API_KEY)
  t.teardown(() => mcp.close())
  t.match(
    textOf(await callTool(mcp, 'read_file', { session_id: sid, path: 'sparse.bin' })),
    /^payload_too_large: sparse\.bin is 17179869184 bytes/,
    'read_file too',
  )
  t.equal((await getFile(h.url, sid, 'fits.bin')).bytes.length, 1000, 'a file within the bound downloads')
  t.equal((await putFile(h.url, sid, 'new.txt', 'still usable')).status, 201, 'the session stays usable')
  t.equal(await killsSince((await containerOf(sid)).id, since), 0, 'every program ended by itself: none was killed')
})
