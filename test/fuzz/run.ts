// A fuzz run against a live server: sessions guarded through the run (a variable set before, read
// after), N requests from a seed on a few concurrent workers, what the answers teach (new sessions,
// executions, event ids, tokens), every broken rule as a fault, and the clean-up of what the run created.
import { OpenApiModel } from './openapi-model.js'
import { keyTenant, makeRequest, type Spec, type Tenant, type World } from './requests.js'
import { send, type Answer } from './send.js'
import { check } from './check.js'

interface Fault {
  seed: number
  i: number
  why: string
  request: string
  answer: string
  reasons: string[]
}

export interface RunOptions {
  base: string
  seed: number
  count: number
  concurrency: number
  /** Only these request numbers (a replay); the others are skipped. */
  only?: Set<number>
  progress?: (done: number, faults: number) => void
}

export interface RunReport {
  requests: number
  statuses: Record<string, number>
  /** How many requests of each kind (Spec.kind) were sent. */
  kinds: Record<string, number>
  faults: Fault[]
  seconds: number
  sessionsCreated: number
}

/** Kinds of request (Spec.kind) a run of 3,000 or more must have sent at least once: each is drawn dozens of times. */
export const REQUIRED_KINDS = [
  'valid',
  ...['missing required field', 'wrong type', 'edge number', 'unknown key', 'prototype key', 'deep nesting', 'long string', 'invalid UTF-8', 'NUL'].map(
    (k) => `mutated body: ${k}`,
  ),
  ...['truncated JSON', 'BOM', 'duplicate keys', 'not JSON', 'wrong content type', 'no content type', 'past the body limit'].map((k) => `malformed body: ${k}`),
  'body on a bodyless operation: past the body limit',
  'odd query: duplicated parameter',
  'odd query: unknown parameter',
  'odd query: prototype key',
  'odd headers: Accept',
  'odd headers: Last-Event-ID',
  'odd authorization: none',
  "odd authorization: another tenant's key",
  'wrong id: another tenant',
  'wrong id: wrong shape',
  'no operation',
  'malformed HTTP',
  'odd target',
  'odd query: percent-encoded name',
]

const GUARDS: Record<Tenant, { name: string; value: number }> = { alpha: { name: 'x', value: 42 }, beta: { name: 'y', value: 7 } }

async function call(base: string, key: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: any; location: string | null }> {
  const res = await fetch(base + path, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await res.text()
  return { status: res.status, body: text ? JSON.parse(text) : null, location: res.headers.get('location') }
}

/** One guarded session per tenant, each with its variable set (x = 42, y = 7). */
export async function prepareWorld(base: string, keys: Record<Tenant, string>, bodyLimit: number): Promise<World> {
  const world: World = { keys, sessions: [], tokens: [], bodyLimit }
  for (const tenant of ['alpha', 'beta'] as const) {
    const created = await call(base, keys[tenant], 'POST', '/v1/sessions', { idle_timeout_s: 86400 })
    if (created.status !== 201) throw new Error(`could not create the guarded session: ${created.status} ${JSON.stringify(created.body)}`)
    const g = GUARDS[tenant]
    const ran = await call(base, keys[tenant], 'POST', `/v1/sessions/${created.body.id}/executions`, { code: `${g.name} = ${g.value}` })
    if (ran.body?.status !== 'ok') throw new Error(`could not set ${g.name}: ${JSON.stringify(ran.body)}`)
    world.sessions.push({
      id: created.body.id,
      tenant,
      guarded: true,
      executions: [ran.body.id],
      processes: [],
      eventIds: ran.body.events.map((e: any) => ({ log: ran.body.id, id: e.id })),
    })
  }
  return world
}

/** Problems with the guarded sessions after the run (gone, or their variable lost). */
export async function checkGuarded(base: string, world: World): Promise<string[]> {
  const out: string[] = []
  for (const s of world.sessions.filter((s) => s.guarded)) {
    const g = GUARDS[s.tenant]
    const r = await call(base, world.keys[s.tenant], 'POST', `/v1/sessions/${s.id}/executions`, { code: `print(${g.name})` })
    const stdout = (r.body?.events ?? [])
      .filter((e: any) => e.type === 'stdout')
      .map((e: any) => e.text)
      .join('')
    if (r.status !== 200 || stdout !== `${g.value}\n`)
      out.push(`guarded session ${s.id} (${s.tenant}) lost ${g.name}: ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`)
  }
  return out
}

/** Deletes every session of both tenants except the guarded ones; returns how many it deleted. */
export async function cleanUp(base: string, world: World, alsoGuarded = false): Promise<number> {
  let n = 0
  for (const tenant of ['alpha', 'beta'] as const) {
    const list = await call(base, world.keys[tenant], 'GET', '/v1/sessions?limit=200')
    for (const s of list.body?.sessions ?? []) {
      if (!alsoGuarded && world.sessions.some((g) => g.guarded && g.id === s.id)) continue
      const d = await call(base, world.keys[tenant], 'DELETE', `/v1/sessions/${s.id}`)
      if (d.status === 204) n++
    }
  }
  return n
}

export async function runFuzz(model: OpenApiModel, world: World, opts: RunOptions): Promise<RunReport> {
  const statuses: Record<string, number> = {}
  const kinds: Record<string, number> = {}
  const faults: Fault[] = []
  let next = 0
  let done = 0
  let sessionsCreated = 0
  const t0 = performance.now()
  const worker = async () => {
    for (;;) {
      const i = next++
      if (i >= opts.count) return
      if (opts.only && !opts.only.has(i)) continue
      const spec = makeRequest(model, world, opts.seed, i)
      // Longer than any wait the server itself bounds (a sandbox start: SANDBOX_START_TIMEOUT_MS, 30 s): past it, a hang.
      const answer = await send(opts.base, spec, { sseMs: 1500, answerMs: 60_000 })
      const key = answer.status ? String(answer.status) : answer.timedOut ? 'no answer' : 'dropped'
      statuses[key] = (statuses[key] ?? 0) + 1
      kinds[spec.kind] = (kinds[spec.kind] ?? 0) + 1
      const reasons = check(model, opts.base, spec, answer)
      if (reasons.length) faults.push({ seed: opts.seed, i, why: spec.why, request: describeRequest(spec), answer: describeAnswer(answer), reasons })
      if (learn(model, world, opts.base, spec, answer)) sessionsCreated++
      done++
      opts.progress?.(done, faults.length)
    }
  }
  await Promise.all(Array.from({ length: opts.concurrency }, worker))
  return { requests: done, statuses, kinds, faults, seconds: (performance.now() - t0) / 1000, sessionsCreated }
}

/** Updates what the run knows from an answer; true when it created a session. */
function learn(model: OpenApiModel, world: World, base: string, spec: Spec, a: Answer): boolean {
  if (spec.raw || !a.status) return false
  const op = model.route(spec.method, new URL(base + spec.url).pathname)
  const tenant = keyTenant(world, spec.headers.authorization)
  const session = world.sessions.find((s) => s.id === spec.sid)
  if (op?.id === 'createSession' && a.status === 201 && tenant) {
    const id = (JSON.parse(a.text) as { id: string }).id
    world.sessions.push({ id, tenant, guarded: false, executions: [], processes: [], eventIds: [] })
    return true
  }
  if (!session || spec.crossTenant) return false
  if (op?.id === 'deleteSession' && a.status === 204 && !session.guarded) world.sessions.splice(world.sessions.indexOf(session), 1)
  if (a.status === 404 && a.text.includes('"session_not_found"') && !session.guarded && tenant === session.tenant) {
    world.sessions.splice(world.sessions.indexOf(session), 1) // reaped at its idle timeout, or deleted meanwhile
  }
  const eid = /\/executions\/(exe_\w+)$/.exec(a.headers.location ?? '')?.[1]
  if (eid) remember(session.executions, eid, 20)
  const pid = /\/processes\/(prc_\w+)$/.exec(a.headers.location ?? '')?.[1]
  if (pid) remember(session.processes, pid, 20)
  // The stream an event came from: the execution or process in the path, or the execution the answer names.
  const log = /\/(?:executions|processes)\/((?:exe|prc)_\w+)/.exec(spec.url)?.[1] ?? eid
  if (log) for (const e of a.events) if (e.id) remember(session.eventIds, { log, id: e.id }, 50)
  if (op?.id === 'createEventsToken' && a.status === 201) {
    const eidInPath = /\/executions\/([^/]+)\/events-token/.exec(spec.url)?.[1]
    if (eidInPath && tenant) remember(world.tokens, { token: (JSON.parse(a.text) as { token: string }).token, sid: session.id, eid: eidInPath, tenant }, 20)
  }
  return false
}

function remember<T>(list: T[], item: T, max: number): void {
  list.push(item)
  if (list.length > max) list.shift()
}

function describeRequest(s: Spec): string {
  if (s.raw) return JSON.stringify(s.raw.toString('latin1').slice(0, 300))
  const body = s.body ? ` ${JSON.stringify(s.body.toString('latin1').slice(0, 200))}${s.body.length > 200 ? `…(${s.body.length} bytes)` : ''}` : ''
  return `${s.method} ${s.url.slice(0, 200)} ${JSON.stringify(s.headers).slice(0, 300)}${body}`
}

function describeAnswer(a: Answer): string {
  if (a.error) return a.error
  return `${a.status} ${a.contentType} ${a.text.slice(0, 300)}`
}
