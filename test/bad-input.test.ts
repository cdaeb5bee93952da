// Bad input never reaches Docker: thousands of generated malformed requests each get a
// problem+json 4xx with a stable code; no 5xx, the service stays up, no container appears.
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { API_KEY, containersOf, startApp } from './helpers/app.js'
import { api, createSession } from './helpers/client.js'

const BODY_LIMIT = 64 * 1024
const MISSING = 'ses_AAAAAAAAAAAAAAAAAAAA'

interface BadRequest {
  method: string
  path: string
  body?: string | Buffer<ArrayBuffer>
  headers?: Record<string, string>
  why: string
}

/** A deterministic pseudo-random generator, so a failing case can be reproduced from its seed. */
function rng(seed: number): () => number {
  let s = seed >>> 0
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0
    return s / 2 ** 32
  }
}

const WRONG_VALUES: unknown[] = [null, true, -1, 0, 1.5, 1e308, -1e308, 'x', '', [], [1], {}, { a: 1 }, '\u202e', 'ä'.repeat(70)]
const MALFORMED_JSON = [
  '{',
  '}',
  '{"code":',
  '{"code": "x",}',
  "{'code': 'x'}",
  '[',
  'nul',
  'undefined',
  '{"a":1}{"b":2}',
  '\u0000',
  '{"code":"\\ud800"',
  '{"code": NaN}',
  '{"code": Infinity}',
  '{"code": 0x10}',
  '"just a string',
  '[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[',
  '{"' + 'k'.repeat(200) + '"',
]
const BAD_URL_IDS = ['%FF%FE', '%E2%82', 'ses_%C0%AF']
const BAD_IDS = [
  ...BAD_URL_IDS,
  'x'.repeat(65),
  '..%2F..%2Fetc%2Fpasswd',
  '%00',
  'ses_%00AAAAAAAAAAAAAAAAAAA',
  '%7B%7D',
  '*',
  '%2A%3A%2A',
  'ses_' + 'A'.repeat(19),
  'ses_AAAAAAAAAAAAAAAAAAAA%0D%0ASet-Cookie:x',
  '%F0%9F%92%A9',
  'null',
  '-1',
  'a%20b',
]

function generate(seed: number, count: number, sid: string): BadRequest[] {
  const r = rng(seed)
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!
  const json = (v: unknown) => JSON.stringify(v)
  const out: BadRequest[] = []
  const createFields = ['idle_timeout_s', 'runtime', 'limits', 'env', 'metadata']
  const gens: Array<() => BadRequest> = [
    // create: wrong types for each field (coercible scalars excluded: see the coercion test)
    () => {
      const f = pick(createFields)
      return { method: 'POST', path: '/v1/sessions', body: json({ [f]: pick([null, [], [1, 2], { x: [] }, true]) }), why: `create ${f} wrong type` }
    },
    () => ({
      method: 'POST',
      path: '/v1/sessions',
      body: json({ limits: { [pick(['memory_mb', 'cpus', 'pids'])]: pick([-1, 0, 1e9, 1e308, 'lots', null, []]) } }),
      why: 'create limit out of range',
    }),
    () => ({ method: 'POST', path: '/v1/sessions', body: json({ [randomBytes(4).toString('hex')]: pick(WRONG_VALUES) }), why: 'create unknown field' }),
    () => ({ method: 'POST', path: '/v1/sessions', body: json({ limits: { [randomBytes(3).toString('hex')]: 1 } }), why: 'create unknown limit' }),
    () => ({
      method: 'POST',
      path: '/v1/sessions',
      body: json({ env: { [pick(['1BAD', 'A-B', 'A B', '', 'X'.repeat(200), 'A=B', 'PYTHONHOME', 'REPLCAST_MAX_STREAM_BYTES', 'LD_PRELOAD'])]: 'v' } }),
      why: 'create bad env name',
    }),
    () => ({
      method: 'POST',
      path: '/v1/sessions',
      body: json({ metadata: { ['k'.repeat(65 + Math.floor(r() * 100))]: 'v' } }),
      why: 'create metadata key too long',
    }),
    () => ({ method: 'POST', path: '/v1/sessions', body: json({ metadata: { k: 'v'.repeat(2000) } }), why: 'create metadata too long' }),
    () => ({ method: 'POST', path: '/v1/sessions', body: json({ idle_timeout_s: pick([0, -5, 1e12, 2.5]) }), why: 'create idle timeout out of range' }),
    () => ({
      method: 'POST',
      path: '/v1/sessions',
      body: json({ runtime: pick(['kata', 'RUNC', 'runc ', '', 'io.containerd.runc.v2']) }),
      why: 'create unknown runtime',
    }),
    () => ({
      method: 'POST',
      path: '/v1/sessions',
      body: json({ __proto__: { polluted: 1 }, constructor: { prototype: { polluted: 1 } } }).replace('{', '{"__proto__":{"polluted":1},'),
      why: 'create prototype keys',
    }),
    // malformed bodies
    () => ({ method: 'POST', path: pick(['/v1/sessions', `/v1/sessions/${sid}/executions`]), body: pick(MALFORMED_JSON), why: 'malformed JSON' }),
    () => ({
      method: 'POST',
      path: pick(['/v1/sessions', `/v1/sessions/${sid}/executions`]),
      body: Buffer.concat([Buffer.from('{"code": "'), Buffer.from([pick([0xff, 0xc0, 0xf8, 0x80]), pick([0x28, 0xa0, 0xff])]), Buffer.from('"}')]),
      why: 'invalid UTF-8',
    }),
    () => ({
      method: 'POST',
      path: pick(['/v1/sessions', `/v1/sessions/${sid}/executions`]),
      body: pick(['{"code": "print(1)\u0000"}', '{"code": "print(1)\\u0000"}', '{"metadata": {"a\\u0000": "b"}}', '{"code": "x", "\\u0000": 1}']),
      why: 'NUL bytes',
    }),
    () => ({
      method: 'POST',
      path: `/v1/sessions/${sid}/executions`,
      body: json({ code: 'print(1)', timeout_s: pick([0, -1, null, [], {}, 1e12]) }),
      why: 'execute bad timeout',
    }),
    () => ({
      method: 'POST',
      path: `/v1/sessions/${sid}/executions`,
      body: json({ code: 'print(1)', [randomBytes(4).toString('hex')]: 1 }),
      why: 'execute unknown field',
    }),
    () => ({
      method: 'POST',
      path: `/v1/sessions/${sid}/executions`,
      body: json({ code: pick([{}, [], [1, 2], null, ['x'], true, 5]) }),
      why: 'execute code wrong type',
    }),
    () => ({ method: 'POST', path: `/v1/sessions/${sid}/executions`, body: json({}), why: 'execute without code' }),
    () => ({ method: 'POST', path: `/v1/sessions/${sid}/executions`, body: '', headers: { 'content-type': 'application/json' }, why: 'execute empty body' }),
    () => ({
      method: 'POST',
      path: pick(['/v1/sessions', `/v1/sessions/${sid}/executions`]),
      body: json({ code: 'x'.repeat(BODY_LIMIT + 1 + Math.floor(r() * 1000)) }),
      why: 'oversized body',
    }),
    () => ({
      method: 'POST',
      path: pick(['/v1/sessions', `/v1/sessions/${sid}/executions`]),
      body: '{"code":"print(1)"}',
      headers: {
        'content-type': pick([
          'text/plain',
          'application/x-www-form-urlencoded',
          'multipart/form-data; boundary=x',
          'application/xml',
          'application/json; charset=utf-16',
        ]),
      },
      why: 'wrong content type',
    }),
    // bad ids and paths
    () => {
      const id = pick(BAD_IDS)
      return { method: pick(['GET', 'DELETE']), path: `/v1/sessions/${id}`, why: `bad session id ${id}` }
    },
    () => {
      const id = pick(BAD_IDS)
      return {
        method: 'POST',
        path: `/v1/sessions/${id}/${pick(['executions', 'interrupt', 'restart'])}`,
        body: json({ code: 'print(1)' }),
        why: `bad session id ${id} (post)`,
      }
    },
    () => {
      const id = pick(BAD_IDS)
      return {
        method: 'GET',
        path: `/v1/sessions/${pick([sid, MISSING])}/executions/${id}${pick(['', '/events'])}`,
        headers: { accept: 'text/event-stream' },
        why: `bad execution id ${id}`,
      }
    },
    () => ({
      method: 'GET',
      path: `/v1/sessions/${MISSING}/executions/exe_AAAAAAAAAAAAAAAAAAAA/events?after=${pick(['x', '1-', '-1', '99999999999999999999999-0', '%00', '1-1%0A'])}`,
      headers: { accept: 'text/event-stream', 'last-event-id': pick(['garbage', '1-2-3', '']) },
      why: 'bad Last-Event-ID / after',
    }),
    () => ({
      method: 'GET',
      path: `/v1/sessions?${pick(['limit=0', 'limit=1000', 'limit=abc', 'limit=-1', 'cursor=' + 'c'.repeat(100), 'unknown=1', 'limit=1&limit=2&limit=x'])}`,
      why: 'bad list query',
    }),
    () => ({ method: pick(['PUT', 'PATCH']), path: `/v1/sessions/${sid}`, body: '{}', why: 'unsupported method' }),
    // authentication
    () => ({
      method: 'GET',
      path: '/v1/sessions',
      headers: {
        authorization: pick([
          '',
          'Bearer',
          'Bearer ',
          'Basic dGVzdDp0ZXN0',
          `Bearer ${API_KEY}x`,
          `Bearer ${API_KEY} extra`,
          `bearer\t${'k'.repeat(5000)}`,
          'Bearer \u00e4\u00e4\u00e4',
        ]),
      },
      why: 'bad key',
    }),
  ]
  for (let i = 0; i < count; i++) out.push(pick(gens)())
  return out
}

async function send(base: string, req: BadRequest): Promise<{ status: number; type: string; body: any }> {
  const headers: Record<string, string> = {
    authorization: `Bearer ${API_KEY}`,
    ...(req.body !== undefined ? { 'content-type': 'application/json' } : {}),
    ...req.headers,
  }
  if (headers.authorization === '') delete headers.authorization
  const res = await fetch(base + req.path, { method: req.method, headers, body: req.body, signal: AbortSignal.timeout(10000) })
  const text = await res.text()
  let body: any = text
  try {
    body = JSON.parse(text)
  } catch {
    /* not JSON */
  }
  return { status: res.status, type: res.headers.get('content-type') ?? '', body }
}

t.test('bad input', async (t) => {
  const h = await startApp(t, { BODY_LIMIT_BYTES: String(BODY_LIMIT), TENANT_RATE_PER_MIN: '1000000' })
  const sid = await createSession(h.url)
  const executionsKey = `${h.prefix}{${sid}}:executions`

  t.test('a few thousand generated bad requests: each a problem+json 4xx, no 5xx, nothing reaches Docker', async (t) => {
    const seed = Number(process.env.BAD_INPUT_SEED ?? Date.now() % 1e9)
    const requests = generate(seed, 3000, sid)
    t.comment(`seed ${seed} (BAD_INPUT_SEED=${seed} reproduces this run)`)
    const failures: string[] = []
    const statuses = new Map<number, number>()
    let next = 0
    const t0 = performance.now()
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < requests.length) {
          const req = requests[next++]!
          try {
            const r = await send(h.url, req)
            statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1)
            const ok =
              r.status >= 400 &&
              r.status < 500 &&
              r.type.startsWith('application/problem+json') &&
              typeof r.body?.code === 'string' &&
              r.body.status === r.status
            if (!ok)
              failures.push(
                `${req.why}: ${req.method} ${req.path.slice(0, 80)} ${JSON.stringify(req.headers ?? {})} ${String(req.body ?? '').slice(0, 60)} → ${r.status} ${r.type} ${JSON.stringify(r.body).slice(0, 200)}`,
              )
          } catch (err) {
            failures.push(`${req.why}: ${req.method} ${req.path.slice(0, 80)} → ${String(err)}`)
          }
        }
      }),
    )
    t.comment(`${requests.length} requests in ${(performance.now() - t0).toFixed(0)} ms; statuses ${JSON.stringify(Object.fromEntries(statuses))}`)
    const kinds = [...new Set(failures.map((f) => f.split(':')[0]))]
    t.same(kinds, [], `every response was a problem+json 4xx (${failures.length} were not)`)
    t.same(failures.slice(0, 10), [], 'the first failures')
    t.ok(statuses.has(413), 'oversized bodies were among them (413)')
    t.equal((await api(h.url, 'GET', '/healthz')).status, 200, 'the service is up')
    t.equal(await h.redis.llen(executionsKey), 0, 'no bad request started an execution')
    const mine = await api(h.url, 'GET', '/v1/sessions')
    t.same(
      mine.body.sessions.map((s: any) => s.id),
      [sid],
      'no bad request created a session',
    )
    t.same(
      (await containersOf(h.deployment)).map((c) => c.Labels['replcast.session']),
      [sid],
      'no container appeared',
    )
    const ok = await api(h.url, 'POST', `/v1/sessions/${sid}/executions`, { code: 'print(1)' })
    t.equal(ok.body.status, 'ok', 'the session still runs code')
  })

  t.test('a URL that is not valid percent-encoded UTF-8 gets a problem+json 400', async (t) => {
    for (const id of BAD_URL_IDS) {
      const r = await api(h.url, 'GET', `/v1/sessions/${id}`)
      t.equal(r.status, 400, `${id} → 400`)
      t.equal(r.headers.get('content-type')?.split(';')[0], 'application/problem+json', `${id} → problem+json`)
    }
  })

  t.test('wrong scalar types are refused, not coerced', async (t) => {
    const before = await h.redis.llen(executionsKey)
    const cases: Array<[string, unknown]> = [
      [`/v1/sessions/${sid}/executions`, { code: 123 }],
      [`/v1/sessions/${sid}/executions`, { code: ['print(1)'] }],
      [`/v1/sessions/${sid}/executions`, { code: 'print(1)', timeout_s: '5' }],
      ['/v1/sessions', { idle_timeout_s: '60', limits: { memory_mb: 1e12 } }],
      ['/v1/sessions', { limits: { memory_mb: '64000000' } }],
    ]
    cases.push(
      ['/v1/sessions', { idle_timeout_s: true }],
      [`/v1/sessions/${sid}/executions`, { code: true }],
      [`/v1/sessions/${sid}/executions`, { code: null }],
    )
    for (const [path, body] of cases) {
      const r = await api(h.url, 'POST', path, body)
      t.equal(r.status, 400, `${JSON.stringify(body)} → 400`)
    }
    t.equal((await h.redis.llen(executionsKey)) - before, 0, 'none of them ran')
  })

  t.test('env names that are invalid or would break or reconfigure the sandbox, and over-long metadata keys, are refused', async (t) => {
    const bodies = [
      { env: { '': 'v' } },
      { env: { 'A-B': 'v' } },
      { env: { PYTHONHOME: '/nonexistent' } },
      { env: { REPLCAST_MAX_STREAM_BYTES: '999999999999' } },
      { env: { LD_PRELOAD: '/workspace/x.so' } },
      { metadata: { ['k'.repeat(65)]: 'v' } },
    ]
    for (const body of bodies) {
      const r = await api(h.url, 'POST', '/v1/sessions', body)
      t.equal(r.status, 400, `${JSON.stringify(body)} → 400 (got ${r.status} ${r.body?.code})`)
      if (r.status === 201) await api(h.url, 'DELETE', `/v1/sessions/${r.body.id}`)
    }
  })
})
