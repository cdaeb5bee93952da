// openapi.yaml lists every status an operation can answer with: for each operation of the document,
// requests that provoke the errors its shape allows (no key, the rate limit, a path id of the wrong
// shape or unknown, a malformed, oversized or non-JSON body, an unknown query parameter, a refused
// Accept) are sent to a live server, and each answer must be the expected status, documented for that
// operation, and problem+json with a registered code of that status. (503 while Redis is away is
// covered by test/faults-redis.test.ts.)
import t from 'tap'
import { connect } from 'node:net'
import { ERRORS } from '../src/errors.js'
import { API_KEY, startApp } from './helpers/app.js'
import { createSession } from './helpers/client.js'
import { startFakeLlm } from './helpers/fake-llm.js'
import { OpenApiModel, type Operation, type Schema } from './fuzz/openapi-model.js'

const BODY_LIMIT = 4096
// Path ids: a well-formed one no session or execution has, and the 404 it gets. Other path
// parameters (a file's path) get a plain value and no probes of their own.
const UNKNOWN_IDS: Record<string, string> = { id: 'ses_AAAAAAAAAAAAAAAAAAAA', eid: 'exe_AAAAAAAAAAAAAAAAAAAA', pid: 'prc_AAAAAAAAAAAAAAAAAAAA' }
const NOT_FOUND_CODES: Record<string, string> = { id: 'session_not_found', eid: 'execution_not_found', pid: 'process_not_found' }
const OTHER_PARAM = 'probe.txt'

interface Probe {
  why: string
  path: Record<string, string>
  query?: string
  headers?: Record<string, string>
  body?: string | Buffer
  status: number
  code: string
}

/** A small body the operation's schema accepts: its required fields only, each at its smallest. */
function minimalBody(model: OpenApiModel, schema: Schema): string {
  const s = model.deref(schema)
  const out: Record<string, unknown> = {}
  for (const name of (s.required ?? []) as string[]) {
    const f = model.deref(s.properties[name])
    // A choice of constants (a signal's name) takes its first.
    const first = Array.isArray(f.anyOf) ? (f.anyOf as Schema[])[0] : f
    const choice = first?.const ?? (Array.isArray(first?.enum) ? first.enum[0] : undefined)
    out[name] = choice !== undefined ? choice : f.type === 'string' ? 'x'.repeat(Math.max(1, f.minLength ?? 1)) : f.type === 'boolean' ? true : (f.minimum ?? 1)
  }
  return JSON.stringify(out)
}

/**
 * The probes an operation's shape calls for, each with the answer it must get. Ids are unknown ones
 * (a probe that got through could not change anything) but for `sid`, a live session, when an
 * execution id is the one to be unknown.
 */
function probesFor(model: OpenApiModel, op: Operation, sid: string): Probe[] {
  const params = op.parameters.filter((p) => p.in === 'path').map((p) => p.name)
  // Under /v1/snapshots/{id} the id is a snapshot's.
  const snapshot = op.path.startsWith('/v1/snapshots/')
  const UNKNOWN = snapshot ? { ...UNKNOWN_IDS, id: 'snp_AAAAAAAAAAAAAAAAAAAA' } : UNKNOWN_IDS
  const NOT_FOUND = snapshot ? { ...NOT_FOUND_CODES, id: 'snapshot_not_found' } : NOT_FOUND_CODES
  const ids = Object.fromEntries(params.map((p) => [p, UNKNOWN[p] ?? OTHER_PARAM]))
  const json = { 'content-type': 'application/json' }
  const valid = op.body ? { headers: json, body: minimalBody(model, op.body) } : {}
  const out: Probe[] = []
  if (op.secured) out.push({ why: 'no key', path: ids, headers: { authorization: '' }, status: 401, code: 'unauthorized' })
  for (const p of params.filter((p) => NOT_FOUND[p])) {
    out.push({ why: `${p} of the wrong shape`, path: { ...ids, [p]: 'nope' }, ...valid, status: 400, code: 'validation_failed' })
    out.push({ why: `${p} not percent-encoded UTF-8`, path: { ...ids, [p]: '%FF' }, ...valid, status: 400, code: 'bad_request' })
    const path = p === 'id' ? ids : { ...ids, id: sid }
    out.push({ why: `unknown ${p}`, path, ...valid, status: 404, code: NOT_FOUND[p]! })
  }
  // A JSON body, or none (Fastify still parses one sent): an upload of raw bytes has its own rules.
  const jsonOrNone = op.bodyTypes.length === 0 || op.bodyTypes.includes('application/json')
  if (['POST', 'PUT', 'PATCH', 'DELETE'].includes(op.method) && jsonOrNone) {
    out.push({ why: 'malformed JSON', path: ids, headers: json, body: '{"a":', status: 400, code: 'bad_request' })
    out.push({ why: 'a body past the limit', path: ids, headers: json, body: Buffer.alloc(BODY_LIMIT + 1, 0x20), status: 413, code: 'payload_too_large' })
    out.push({ why: 'a text/plain body', path: ids, headers: { 'content-type': 'text/plain' }, body: 'hello', status: 415, code: 'unsupported_media_type' })
  }
  if (op.body)
    out.push({
      why: 'a body of the wrong type',
      path: ids,
      headers: { 'content-type': 'application/json' },
      body: '[]',
      status: 400,
      code: 'validation_failed',
    })
  if (op.parameters.some((p) => p.in === 'query'))
    out.push({ why: 'an unknown query parameter', path: ids, query: 'nope=1', status: 400, code: 'validation_failed' })
  if (op.parameters.some((p) => p.in === 'header'))
    out.push({
      why: 'a header of the wrong shape',
      path: ids,
      headers: { accept: 'text/event-stream', 'last-event-id': 'garbage' },
      status: 400,
      code: 'validation_failed',
    })
  const sseOnly = [...(op.responses.get(200)?.keys() ?? [])].join() === 'text/event-stream'
  if (sseOnly) {
    // Every other probe asks for the stream, so that it is its own error that answers.
    for (const p of out) p.headers = { accept: 'text/event-stream', ...p.headers }
    out.push({ why: 'Accept refuses text/event-stream', path: ids, headers: { accept: 'application/json' }, status: 406, code: 'not_acceptable' })
  }
  return out
}

async function send(base: string, op: Operation, p: Probe): Promise<{ status: number; type: string; body: any }> {
  const path = op.path.replace(/\{(\w+)\}/g, (_m, name: string) => p.path[name]!)
  const headers: Record<string, string> = { authorization: `Bearer ${API_KEY}`, ...p.headers }
  if (!headers.authorization) delete headers.authorization
  const res = await fetch(`${base}${path}${p.query ? `?${p.query}` : ''}`, {
    method: op.method,
    headers,
    body: Buffer.isBuffer(p.body) ? new Uint8Array(p.body) : p.body,
  })
  const text = await res.text()
  let body: any
  try {
    body = JSON.parse(text)
  } catch {
    body = text
  }
  return { status: res.status, type: res.headers.get('content-type') ?? '', body }
}

/** What is wrong with an answer to a probe (nothing: it is the expected, documented problem). */
function judge(op: Operation, p: Probe, a: { status: number; type: string; body: any }): string[] {
  const out: string[] = []
  if (a.status !== p.status || a.body?.code !== p.code)
    out.push(`answered ${a.status} ${a.body?.code ?? JSON.stringify(a.body).slice(0, 80)}, not ${p.status} ${p.code}`)
  if (!op.responses.get(a.status)?.has('application/problem+json')) out.push(`${a.status} is not documented as a problem for ${op.id}`)
  if (!a.type.startsWith('application/problem+json')) out.push(`${a.status} came as ${a.type}`)
  const registered = (ERRORS as Record<string, { status: number }>)[a.body?.code]
  if (registered?.status !== a.status || a.body?.status !== a.status) out.push(`code ${a.body?.code} is not registered with ${a.status}`)
  return out
}

t.test('every error an operation can answer with because of its shape is documented for it, as problem+json', async (t) => {
  // An LLM endpoint, so that an LLM turn for an unknown session gets as far as looking the session up.
  const llm = await startFakeLlm()
  t.teardown(() => llm.close())
  const h = await startApp(t, { BODY_LIMIT_BYTES: String(BODY_LIMIT), OPENAI_BASE_URL: llm.baseURL, OPENAI_API_KEY: 'fake-key' })
  const model = OpenApiModel.load()
  const sid = await createSession(h.url)
  const failures: string[] = []
  let probes = 0
  for (const op of model.operations) {
    for (const p of probesFor(model, op, sid)) {
      probes++
      for (const f of judge(op, p, await send(h.url, op, p))) failures.push(`${op.id} (${op.method} ${op.path}), ${p.why}: ${f}`)
    }
  }
  t.comment(`${probes} probes over ${model.operations.length} operations`)
  t.ok(probes > 60, 'every operation was probed')
  t.same(failures, [], 'each answer is the expected problem, documented for its operation')
})

t.test("every authenticated operation documents the tenant's rate limit (429) it answers with", async (t) => {
  const h = await startApp(t, { TENANT_RATE_PER_MIN: '1' })
  const model = OpenApiModel.load()
  const failures: string[] = []
  const secured = model.operations.filter((op) => op.secured)
  // The first request spends the minute's one; every one after it is over the limit.
  await send(h.url, secured[0]!, { why: 'spend the limit', path: UNKNOWN_IDS, status: 0, code: '' })
  for (const op of secured) {
    const p: Probe = { why: 'over the rate limit', path: UNKNOWN_IDS, status: 429, code: 'rate_limited' }
    for (const f of judge(op, p, await send(h.url, op, p))) failures.push(`${op.id}: ${f}`)
  }
  t.ok(secured.length >= 10, 'the authenticated operations')
  t.same(failures, [], 'each is a documented 429 rate_limited')
})

/** Writes bytes to the server as they are; resolves with what it answered before closing. */
function rawExchange(base: string, bytes: string): Promise<string> {
  const url = new URL(base)
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = []
    const sock = connect(Number(url.port), url.hostname, () => sock.end(bytes, 'latin1'))
    sock.on('data', (b: Buffer) => parts.push(b))
    sock.on('error', reject)
    sock.on('close', () => resolve(Buffer.concat(parts).toString('latin1')))
  })
}

t.test('bytes that are not well-formed HTTP get a problem+json answer too', async (t) => {
  const h = await startApp(t)
  const cases: Array<[string, string, number, string]> = [
    ['two Content-Lengths', 'POST /v1/sessions HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}', 400, 'bad_request'],
    ['a header without a colon', 'GET /v1/sessions HTTP/1.1\r\nHost: h\r\nBad Header\r\n\r\n', 400, 'bad_request'],
    ['headers past the limit', `GET /v1/sessions HTTP/1.1\r\nHost: h\r\nX-A: ${'a'.repeat(20_000)}\r\n\r\n`, 431, 'headers_too_large'],
  ]
  for (const [why, bytes, status, code] of cases) {
    const answer = await rawExchange(h.url, bytes)
    const [head = '', body = ''] = answer.split('\r\n\r\n')
    t.match(head, new RegExp(`^HTTP/1\\.1 ${status} `), `${why}: ${status}`)
    t.match(head, /\r\ncontent-type: application\/problem\+json/i, `${why}: problem+json`)
    t.match(JSON.parse(body || '{}'), { status, code }, `${why}: code ${code}`)
  }
  t.equal((await fetch(`${h.url}/healthz`)).status, 200, 'the server is up')
})
