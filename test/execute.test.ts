// POST /v1/execute: one-shot code in a fresh sandbox (from the warm pool when it matches), answered
// exactly like an execution (SSE or JSON), with input files, counted by the tenant's quotas, and
// destroyed afterwards: nothing of one call reaches the next, and a client that leaves leaks nothing.
import t from 'tap'
import { createHash } from 'node:crypto'
import { API_KEY, containersOf, OTHER_KEY, startApp, type Harness } from './helpers/app.js'
import { api, createSession, executeSse, readSse, stdoutOf, type SseEvent } from './helpers/client.js'
import { metricValue } from './helpers/metrics.js'
import { LIST_PROCESSES } from './helpers/files.js'
import { isolatedServer, killHard } from './helpers/server-process.js'
import { waitFor } from './helpers/wait.js'

function post(h: Harness, body: unknown, opts: { sse?: boolean; key?: string; signal?: AbortSignal } = {}): Promise<Response> {
  return fetch(`${h.url}/v1/execute`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${opts.key ?? API_KEY}`,
      'content-type': 'application/json',
      ...(opts.sse ? { accept: 'text/event-stream' } : {}),
    },
    body: JSON.stringify(body),
    signal: opts.signal,
  })
}

async function once(h: Harness, body: unknown, key?: string): Promise<{ status: number; body: any; headers: Headers }> {
  const res = await post(h, body, { key })
  return { status: res.status, body: await res.json(), headers: res.headers }
}

const textOf = (events: Array<{ type: string; text?: string }>, type = 'stdout') =>
  events
    .filter((e) => e.type === type)
    .map((e) => e.text)
    .join('')

/** Nothing of any one-shot left: no session listed, and no container but the pool's waiting (unbound) ones. */
async function nothingLeft(h: Harness, key = API_KEY): Promise<boolean> {
  const listed = await api(h.url, 'GET', '/v1/sessions', undefined, { key })
  const containers = await containersOf(h.deployment)
  const bound = await Promise.all(containers.map((c) => h.redis.hget(`${h.prefix}pool-bindings`, c.Id)))
  const serving = containers.filter((c, i) => c.Labels['replcast.pool'] !== 'true' || bound[i] !== null)
  return listed.body.sessions.length === 0 && serving.length === 0
}

t.test('JSON and SSE answers are an execution, from the pool, and the sandbox is gone afterwards', async (t) => {
  const h = await startApp(t, { SANDBOX_POOL_SIZE: '2' })
  t.ok(await waitFor(async () => (await metricValue(h.url, 'replcast_pool_sandboxes', { state: 'ready' })) === 2, 60000, 50))

  const json = await once(h, { code: 'print(1)\n1 + 1' })
  t.equal(json.status, 200)
  t.match(json.headers.get('content-type'), /application\/json/)
  t.equal(json.headers.get('location'), null, 'no Location: the execution goes with its sandbox')
  t.equal(json.body.status, 'ok')
  t.match(json.body.id, /^exe_/)
  t.equal(textOf(json.body.events), '1\n')
  t.same(
    json.body.events.map((e: { type: string }) => e.type),
    ['status', 'stdout', 'result', 'done'],
  )
  t.equal(json.body.events.find((e: { type: string }) => e.type === 'result').data['text/plain'], '2')

  const res = await post(h, { code: 'print(1)' }, { sse: true })
  t.equal(res.status, 200)
  t.match(res.headers.get('content-type'), /text\/event-stream/)
  const events = await readSse(res)
  t.same(
    events.map((e) => e.event),
    ['status', 'stdout', 'done'],
    'the same events, one done',
  )
  t.equal(events.at(-1)!.data.status, 'ok')
  t.ok(
    events.every((e) => e.id),
    'each with its id',
  )
  t.equal(await metricValue(h.url, 'replcast_pool_takes_total', { result: 'hit' }), 2, 'both came from the pool')
  t.ok(await waitFor(() => nothingLeft(h)), 'no session and no sandbox left')
})

t.test('nothing of one call is visible to the next: files, variables, processes, /tmp', async (t) => {
  const h = await startApp(t, { SANDBOX_POOL_SIZE: '1' })
  const first = await once(h, {
    code: [
      'import subprocess, pathlib',
      "pathlib.Path('/workspace/secret.txt').write_text('mine')",
      "pathlib.Path('/tmp/secret.txt').write_text('mine')",
      'leftover = 42',
      "p = subprocess.Popen(['sleep', '300'])",
      "print('planted', p.pid)",
    ].join('\n'),
  })
  t.match(textOf(first.body.events), /^planted \d+/)
  const second = await once(h, {
    code: [
      LIST_PROCESSES,
      "print(os.listdir('/workspace'), os.path.exists('/tmp/secret.txt'), 'leftover' in globals(), any(b'sleep' in c for c in procs))",
    ].join('\n'),
  })
  t.equal(textOf(second.body.events), '[] False False False\n', 'a fresh sandbox: empty workspace and /tmp, no variables, no processes')
  t.not(second.body.session_id, first.body.session_id)
})

t.test('input files arrive byte for byte before the code runs; bad paths are refused before any sandbox', async (t) => {
  const h = await startApp(t)
  const blob = Buffer.from(Array.from({ length: 70_000 }, (_, i) => (i * 7919) % 256))
  const r = await once(h, {
    code: [
      'import hashlib, os',
      "print(hashlib.sha256(open('data/blob.bin', 'rb').read()).hexdigest())",
      "print(open('notes.txt').read(), os.path.getsize('empty'))",
    ].join('\n'),
    files: [
      { path: 'data/blob.bin', content_base64: blob.toString('base64') },
      { path: 'notes.txt', content_base64: Buffer.from('héllo').toString('base64') },
      { path: 'empty', content_base64: '' },
    ],
  })
  t.equal(r.status, 200)
  t.equal(textOf(r.body.events), `${createHash('sha256').update(blob).digest('hex')}\nhéllo 0\n`)

  for (const path of ['../escape', '/etc/passwd', 'a/../../b', '..']) {
    const bad = await once(h, { code: 'print(1)', files: [{ path, content_base64: 'eA==' }] })
    t.equal(bad.status, 400, JSON.stringify(path))
    t.equal(bad.body.code, 'invalid_path')
  }
  // NUL never gets past the JSON body parser (any route).
  const nul = await once(h, { code: 'print(1)', files: [{ path: 'nul\u0000byte', content_base64: 'eA==' }] })
  t.equal(nul.status, 400)
  t.equal(nul.body.code, 'bad_request')
  const notBase64 = await once(h, { code: 'print(1)', files: [{ path: 'x', content_base64: 'not base64!' }] })
  t.equal(notBase64.status, 400)
  t.equal(notBase64.body.code, 'validation_failed')
  const tooBig = await once(h, {
    code: 'print(1)',
    limits: { workspace_mb: 1 },
    files: [{ path: 'big', content_base64: Buffer.alloc(2 * 2 ** 20).toString('base64') }],
  })
  t.equal(tooBig.status, 413, 'a file larger than the workspace')
  t.equal(tooBig.body.code, 'workspace_full')
  t.ok(await waitFor(() => nothingLeft(h)), 'refused calls leave nothing')
})

t.test('quotas: a one-shot counts as a session and as an execution', async (t) => {
  const limits = { beta: { max_sessions: 2, max_concurrent_executions: 1 } }
  const h = await startApp(t, { REPLCAST_TENANT_LIMITS: JSON.stringify(limits) })
  const sid = await createSession(h.url, {}, OTHER_KEY)
  // One execution running in the tenant's session takes its only execution slot.
  const running = executeSse(h.url, sid, 'import time\nprint("go", flush=True)\ntime.sleep(30)', { key: OTHER_KEY, until: (e) => e.event === 'stdout' })
  t.equal(stdoutOf((await running).events), 'go\n')
  const busy = await once(h, { code: 'print(1)' }, OTHER_KEY)
  t.equal(busy.status, 429, 'no execution slot left')
  t.equal(busy.body.code, 'quota_exceeded')
  t.ok(
    await waitFor(async () => (await api(h.url, 'GET', '/v1/sessions', undefined, { key: OTHER_KEY })).body.sessions.length === 1),
    'its session is gone again',
  )
  t.equal((await api(h.url, 'POST', `/v1/sessions/${sid}/interrupt`, undefined, { key: OTHER_KEY })).status, 202)

  // While a one-shot runs it holds one of the tenant's sessions.
  const res = await post(h, { code: 'import time\nprint("go", flush=True)\ntime.sleep(30)', timeout_s: 2 }, { sse: true, key: OTHER_KEY })
  const seen: SseEvent[] = []
  const done = readSse(res, (e) => {
    seen.push(e)
    return e.event === 'done'
  })
  t.ok(await waitFor(() => seen.some((e) => e.event === 'stdout')), 'the one-shot runs')
  const full = await api(h.url, 'POST', '/v1/sessions', {}, { key: OTHER_KEY })
  t.equal(full.status, 429, 'the one-shot counts as a session')
  t.equal(full.body.code, 'quota_exceeded')
  t.equal((await done).at(-1)!.data.status, 'timeout')
  t.ok(await waitFor(async () => (await api(h.url, 'POST', '/v1/sessions', {}, { key: OTHER_KEY })).status === 201), 'its session is freed once it ended')
  const ceiling = await once(h, { code: 'print(1)', timeout_s: 1e6 })
  t.equal(ceiling.status, 400)
  t.equal(ceiling.body.code, 'limit_exceeded')
})

t.test('a client that leaves: the code runs to its end, then the sandbox is destroyed', async (t) => {
  const h = await startApp(t)
  const ac = new AbortController()
  const res = await post(h, { code: 'import time\nprint("start", flush=True)\ntime.sleep(2)\nprint("end")' }, { sse: true, signal: ac.signal })
  const first = await readSse(res, (e) => e.event === 'stdout')
  const eid = first[0]!.data.execution_id as string
  ac.abort()
  const [key] = await h.redis.keys(`${h.prefix}*:exec:${eid}`)
  t.ok(key, 'the execution is recorded')
  t.ok(await waitFor(async () => (await h.redis.hget(key!, 'status')) === 'ok', 20000), 'it ran to its end (ok) after the client left')
  t.ok(await waitFor(() => nothingLeft(h)), 'then its session and sandbox went')
})

t.test('a one-shot bash script: its output and exit code, like a bash execution', async (t) => {
  const h = await startApp(t)
  const r = await once(h, { language: 'bash', code: 'echo "in $(pwd)"; exit 3' })
  t.equal(r.status, 200)
  t.equal(textOf(r.body.events), 'in /workspace\n')
  const done = r.body.events.at(-1)
  t.equal(done.type, 'done')
  t.equal(done.status, 'error')
  t.equal(done.exit_code, 3)
})

t.test('an API that dies during a one-shot leaves its sandbox to the reaper', async (t) => {
  // A short idle timeout for the tenant makes the one-shot's session (idle at most 30 s) go quickly.
  const s = await isolatedServer(t, 'one-shot-crash', { REPLCAST_TENANT_LIMITS: JSON.stringify({ alpha: { max_idle_timeout_s: 2 } }) })
  const deployment = s.env.REPLCAST_DEPLOYMENT!
  const res = await fetch(`${s.server.url}/v1/execute`, {
    method: 'POST',
    headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({ code: 'import time\nprint("start", flush=True)\ntime.sleep(2)\nprint("end")' }),
  })
  await readSse(res, (e) => e.event === 'stdout')
  t.equal((await containersOf(deployment)).length, 1, 'its sandbox runs')
  await killHard(s.server)
  await s.respawn()
  t.ok(await waitFor(async () => (await containersOf(deployment)).length === 0, 30000), 'the restarted instance reaps it once idle')
})
