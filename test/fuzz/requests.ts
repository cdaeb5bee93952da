// Request i of a fuzz run, drawn from openapi.yaml and the run's seed: an operation, then one kind of
// request for it (valid, a mutated or malformed body, odd query or headers, other tenants' or
// wrong-shaped ids, no operation at all, malformed HTTP), with ids taken from what the run has seen.
import { rng, type Rng } from './random.js'
import type { OpenApiModel, Operation } from './openapi-model.js'
import { SAFE_CODE, validValue } from './values.js'
import { badBody, bodyOnBodyless, mutatedBody } from './bodies.js'
import { oddAuthorization, oddHeaders, oddQuery, oddTarget, rawRequest, unroutedRequest, wrongId } from './odd-requests.js'

export type Tenant = 'alpha' | 'beta'

interface KnownSession {
  id: string
  tenant: Tenant
  /** Created before the run; its variables are checked afterwards, so nothing may delete, restart or overwrite it. */
  guarded: boolean
  executions: string[]
  /** Its background processes' ids, as the run learnt them. */
  processes: string[]
  /**
   * Event ids it has seen, each with the log it came from (an execution's or a process's id): a
   * resume position belongs to its own stream (ids of two streams do not order), so a valid resume
   * takes one of the stream's own.
   */
  eventIds: Array<{ log: string; id: string }>
}

/** What the run knows so far: keys, live sessions and their executions, minted event tokens. */
export interface World {
  keys: Record<Tenant, string>
  sessions: KnownSession[]
  tokens: Array<{ token: string; sid: string; eid: string; tenant: Tenant }>
  bodyLimit: number
}

export interface Spec {
  i: number
  why: string
  /** The kind of request, without its details (e.g. "mutated body: edge number"): the run counts them. */
  kind: string
  method: string
  /** Path and query, already percent-encoded as sent. */
  url: string
  headers: Record<string, string>
  body?: Buffer
  /** Sent over a raw socket as these exact bytes (malformed HTTP). */
  raw?: Buffer
  /** The document's schemas accept every part of this request: a validation_failed answer is a fault. */
  validPerDoc: boolean
  /** The path names another tenant's resource than the key's: any 2xx is a fault. */
  crossTenant: boolean
  /** The session this request addresses (for learning execution ids from the answer). */
  sid?: string
  /** Whatever it names, the answer must be 400 (a request target that is not a path). */
  mustRefuse?: boolean
  /** It resumes a stream after another stream's event id: what follows is undefined, but never two ends. */
  foreignResume?: boolean
}

const WEIGHTS: Record<string, number> = {
  createSession: 5,
  listSessions: 5,
  getSession: 5,
  deleteSession: 4,
  interruptSession: 5,
  restartSession: 2,
  execute: 14,
  getExecution: 6,
  streamExecutionEvents: 9,
  createEventsToken: 5,
  startProcess: 5,
  listProcesses: 3,
  getProcess: 3,
  streamProcessOutput: 4,
  writeProcessStdin: 3,
  signalProcess: 3,
  deleteProcess: 2,
  sendMessage: 8,
  listMessages: 4,
  healthz: 1,
  readyz: 1,
  metrics: 1,
  openapi: 1,
}
const DESTRUCTIVE = new Set(['deleteSession', 'restartSession'])

const randomId = (r: Rng, prefix: string) => `${prefix}_${r.chars(20, 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789')}`

export function makeRequest(model: OpenApiModel, world: World, seed: number, i: number): Spec {
  const r = rng(seed, i)
  const kind = r.weighted([
    [96, 'operation'],
    [2, 'unrouted'],
    [1, 'raw'],
    [1, 'target'],
  ] as const)
  if (kind === 'raw') return { ...rawRequest(r, world), i, kind: 'malformed HTTP' }
  if (kind === 'target') return { ...oddTarget(r, world), i, kind: 'odd target' }
  if (kind === 'unrouted') return { ...unroutedRequest(r, world), i, kind: 'no operation' }
  const op = r.weighted(model.operations.map((o) => [WEIGHTS[o.id] ?? 1, o] as const))
  return forOperation(model, world, r, op, i)
}

function forOperation(model: OpenApiModel, world: World, r: Rng, op: Operation, i: number): Spec {
  const hasBody = !!op.body
  const takesBody = op.method === 'POST' || op.method === 'DELETE'
  const hasQuery = op.parameters.some((p) => p.in === 'query')
  const hasIds = op.parameters.some((p) => p.in === 'path')
  const variant = r.weighted([
    [30, 'valid'],
    [hasBody ? 22 : 0, 'mutated body'],
    [hasBody ? 12 : 0, 'malformed body'],
    [!hasBody && takesBody ? 5 : 0, 'body on a bodyless operation'],
    [hasQuery ? 10 : 3, 'odd query'],
    [8, 'odd headers'],
    [op.secured ? 8 : 0, 'odd authorization'],
    [hasIds ? 12 : 0, 'wrong id'],
  ] as const)

  // The tenant whose key is sent, and the ids in the path.
  const tenant: Tenant = r.chance(0.1) ? 'beta' : 'alpha'
  const mine = world.sessions.filter((s) => s.tenant === tenant)
  let session = mine.length && r.chance(0.85) ? r.pick(mine) : undefined
  if (session?.guarded && DESTRUCTIVE.has(op.id)) session = mine.find((s) => !s.guarded)
  // A snapshot's routes name a snapshot (none the run knows: they answer 404), the others a session.
  const snapshotPath = op.path.startsWith('/v1/snapshots/')
  const ids: Record<string, string> = {
    id: snapshotPath ? randomId(r, 'snp') : (session?.id ?? randomId(r, 'ses')),
    eid: session?.executions.length && r.chance(0.85) ? r.pick(session.executions) : randomId(r, 'exe'),
    pid: session?.processes.length && r.chance(0.85) ? r.pick(session.processes) : randomId(r, 'prc'),
  }
  // Other path parameters (a file's path) are drawn from their schemas.
  for (const p of op.parameters.filter((p) => p.in === 'path' && !(p.name in ids))) ids[p.name] = String(validValue(model, p.schema, r, p.name))
  let crossTenant = false
  let validIds = true
  let kind: string = variant
  /** Path parameters set to wrong values that are already percent-encoded as they are to be sent. */
  const rawIds = new Set<string>()
  if (variant === 'wrong id') {
    const w = wrongId(r, world, tenant)
    const inner = op.parameters.find((p) => p.name === 'eid' || p.name === 'pid')?.name
    const which = !w.crossTenant && inner && r.chance(0.4) ? inner : 'id'
    ids[which] = w.value
    rawIds.add(which)
    if (w.crossTenant) {
      // Another tenant's session (and one of its executions): addressed with this tenant's key.
      const other = world.sessions.find((s) => s.id === w.value)
      ids.eid = other?.executions.length ? r.pick(other.executions) : randomId(r, 'exe')
      ids.pid = other?.processes.length ? r.pick(other.processes) : randomId(r, 'prc')
    }
    // Another tenant's session id is no snapshot id: for a snapshot's route it is only a wrong shape.
    crossTenant = w.crossTenant && !snapshotPath
    validIds = crossTenant || pathValueValid(model, op, which, w.value)
    kind = crossTenant ? 'wrong id: another tenant' : 'wrong id: wrong shape'
  }
  const path = op.path.replace(/\{(\w+)\}/g, (_m, name: string) => (rawIds.has(name) ? ids[name]! : encodeURIComponent(ids[name]!)))

  // Query and headers: valid ones first; the odd variants replace them.
  const query: string[] = []
  let validQuery = true
  const known = world.sessions.find((s) => s.id === ids.id)
  // A resume position is best one the run has seen of this stream; drawn from the schema it is mostly refused.
  const stream = op.id === 'streamProcessOutput' ? ids.pid : ids.eid
  const own = (known?.eventIds ?? []).filter((e) => e.log === stream).map((e) => e.id)
  for (const p of op.parameters.filter((p) => p.in === 'query' && p.name !== 'access_token')) {
    if (!p.required && !r.chance(0.5)) continue
    const value = p.name === 'after' && own.length && r.chance(0.7) ? r.pick(own) : validValue(model, p.schema, r, p.name)
    validQuery &&= model.validate(p.schema, value) === null
    query.push(`${p.name}=${encodeURIComponent(String(value))}`)
  }
  const headers: Record<string, string> = { authorization: `Bearer ${world.keys[tenant]}` }
  if (op.id === 'streamExecutionEvents' || op.id === 'streamProcessOutput') {
    headers.accept = 'text/event-stream'
    if (own.length && r.chance(0.4)) headers['last-event-id'] = r.pick(own)
  } else if (op.responses.get(200)?.has('text/event-stream')) {
    headers.accept = r.pick(['text/event-stream', 'application/json', '*/*'])
  } else if (r.chance(0.3)) headers.accept = r.pick(['application/json', '*/*', 'application/problem+json'])

  let body: Buffer | undefined
  let validBody = true
  if (hasBody) {
    let value = validValue(model, op.body!, r, '')
    // Code sent to a guarded session is one of the safe snippets, so the session's state survives.
    if (op.id === 'execute' && session?.guarded && value && typeof value === 'object') (value as Record<string, unknown>).code = r.pick(SAFE_CODE)
    if (op.id === 'sendMessage' && value && typeof value === 'object') value = trimTurn(value as Record<string, unknown>)
    body = Buffer.from(JSON.stringify(value))
    headers['content-type'] = 'application/json'
    validBody = model.validate(op.body!, value) === null
  }
  let why = `${op.id}: ${variant}`
  const spec: Spec = { i, why, kind, method: op.method, url: path, headers, body, validPerDoc: validIds && validBody && validQuery, crossTenant, sid: ids.id }

  switch (variant) {
    case 'mutated body': {
      const m = mutatedBody(model, op.body!, r, world.bodyLimit, JSON.parse(body!.toString()))
      spec.body = m.body
      spec.validPerDoc = validIds && validQuery && m.validPerDoc
      why += ` (${m.why})`
      spec.kind = `mutated body: ${m.kind}`
      break
    }
    case 'malformed body': {
      const m = badBody(r, body!, world.bodyLimit)
      spec.body = m.body
      if (m.contentType === undefined) delete headers['content-type']
      else headers['content-type'] = m.contentType
      spec.validPerDoc = false
      why += ` (${m.why})`
      spec.kind = `malformed body: ${m.why}`
      break
    }
    case 'body on a bodyless operation': {
      const m = bodyOnBodyless(r, world.bodyLimit)
      spec.body = m.body
      if (m.contentType !== undefined) headers['content-type'] = m.contentType
      why += ` (${m.why})`
      spec.kind = `body on a bodyless operation: ${m.why}`
      break
    }
    case 'odd query': {
      const q = oddQuery(r, op)
      query.splice(0, query.length, ...q.parts)
      spec.validPerDoc = false
      why += ` (${q.why})`
      spec.kind = `odd query: ${q.why}`
      break
    }
    case 'odd headers': {
      const h = oddHeaders(r, world, ids.id!)
      // defineProperty, not assignment: a header named __proto__ must stay a header.
      for (const [k, v] of Object.entries(h.headers)) Object.defineProperty(headers, k, { value: v, enumerable: true, writable: true, configurable: true })
      why += ` (${h.why})`
      spec.kind = `odd headers: ${h.kind}`
      spec.foreignResume = h.foreignResume
      break
    }
    case 'odd authorization': {
      const a = oddAuthorization(r, world, tenant, op, ids)
      if (a.authorization === undefined) delete headers.authorization
      else headers.authorization = a.authorization
      if (a.query) query.push(a.query)
      if (a.url) spec.url = a.url
      if (a.sid) spec.sid = a.sid
      spec.crossTenant = a.crossTenant ?? crossTenant
      why += ` (${a.why})`
      spec.kind = `odd authorization: ${a.why}`
      break
    }
  }
  // Header parameters the operation declares must match their schemas (a value's outer whitespace is not part of it).
  for (const p of op.parameters.filter((p) => p.in === 'header')) {
    const v = Object.hasOwn(headers, p.name) ? headers[p.name] : undefined
    if (v !== undefined && model.validate(p.schema, v.trim()) !== null) spec.validPerDoc = false
  }
  // A session addressed with a valid key of another tenant than its own.
  const target = world.sessions.find((s) => s.id === spec.sid)
  const caller = keyTenant(world, headers.authorization)
  if (target && caller && target.tenant !== caller && op.parameters.some((p) => p.name === 'id')) spec.crossTenant = true
  spec.why = why
  if (query.length) spec.url += `${spec.url.includes('?') ? '&' : '?'}${query.join('&')}`
  return spec
}

/** The tenant a Bearer header authenticates as (the server's own reading of it), or null. */
export function keyTenant(world: World, authorization: string | undefined): Tenant | null {
  const key = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '')?.[1]
  return (Object.keys(world.keys) as Tenant[]).find((t) => world.keys[t] === key) ?? null
}

/** Whether a path id, percent-encoded as sent, decodes to a value its parameter's schema accepts. */
function pathValueValid(model: OpenApiModel, op: Operation, name: string, encoded: string): boolean {
  let decoded: string
  try {
    decoded = decodeURIComponent(encoded)
  } catch {
    return false
  }
  const schema = op.parameters.find((p) => p.name === name)?.schema
  // "." and ".." are path steps, not ids: the URL resolves to another path.
  return !['.', '..', '%2e%2e'].includes(encoded.toLowerCase()) && model.validate(schema, decoded) === null
}

/** LLM turns in the fuzz run stay small: a few steps and attempts, short timeouts. */
function trimTurn(v: Record<string, unknown>): Record<string, unknown> {
  for (const k of ['max_steps', 'max_attempts'] as const) if (typeof v[k] === 'number') v[k] = Math.min(v[k], 3)
  return v
}
