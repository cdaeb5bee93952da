// What one request costs on the API's critical path, seen from inside the benchmark's process: every
// Redis round trip (a command, or a MULTI/pipeline sent in one write), every Docker API call and the
// HTTP request's own start and end, each with its time since the trace began. Used by bench/pool.ts
// (round trips per request) and bench/pool-trace.ts (a per-phase timeline of one request).
import diagnostics from 'node:diagnostics_channel'
import type { ClientRequest, IncomingMessage } from 'node:http'
import { Redis } from 'ioredis'

/** One entry of a trace: `at` and `end` in ms since the trace began (`end` null: no answer yet, or none awaited). */
export interface TraceEntry {
  kind: 'redis' | 'docker' | 'http'
  what: string
  at: number
  end: number | null
}

interface SentCommand {
  name: string
  args: unknown[]
  promise: Promise<unknown>
}

let current: { t0: number; entries: TraceEntry[]; prefix: string } | null = null
let installed = false
/** Connections of the benchmark itself (waiting for a clean-up to finish): not the API's round trips. */
const ignored = new WeakSet<Redis>()

/** Leaves `redis` (the benchmark's own connection) out of every trace. */
export function untraced(redis: Redis): Redis {
  ignored.add(redis)
  return redis
}

/** The command's first key with the key prefix cut off, for reading (`{ses_…}:session`, `deadlines`). */
function firstKey(c: SentCommand, prefix: string): string {
  const name = c.name.toLowerCase()
  // EVAL script numkeys key ...: the script is long, the key says what it is about.
  const arg = name === 'eval' || name === 'evalsha' ? c.args[2] : c.args[0]
  const s = typeof arg === 'string' ? arg : Buffer.isBuffer(arg) ? arg.toString() : ''
  return (s.startsWith(prefix) ? s.slice(prefix.length) : s).replace(/\{(ses|exe)_[^}]*\}/g, '{$1}').replace(/:(exe_)[A-Za-z0-9_-]+/g, ':$1')
}

/** A script's name (as defined on the connection, less `replcast_`) from its SHA1, for `evalsha` entries. */
function scriptName(redis: Redis, sha: unknown): string {
  const scripts = (redis as unknown as { scriptsSet?: Record<string, { sha?: string }> }).scriptsSet ?? {}
  const found = Object.entries(scripts).find(([, s]) => s.sha === sha)
  return found ? ` ${found[0].replace(/^replcast_/, '')}` : ''
}

function install(): void {
  if (installed) return
  installed = true
  // A pipeline (MULTI … EXEC included) hands every command to sendCommand with the same stream
  // within one synchronous loop and writes them at once: one round trip, whose end is its last reply.
  let batch: { stream: unknown; entry: TraceEntry; pending: Promise<unknown>[] } | null = null
  const proto = Redis.prototype as unknown as { sendCommand: (this: Redis, c: unknown, s?: unknown, n?: unknown) => unknown }
  const send = proto.sendCommand
  proto.sendCommand = function (this: Redis, command: unknown, stream?: unknown, node?: unknown) {
    const out = send.call(this, command, stream, node)
    const t = current
    const c = command as SentCommand
    if (!t || ignored.has(this)) return out
    // The event feed's blocking XREAD waits on purpose: not a round trip of any request.
    if (c.name.toLowerCase() === 'xread' || c.name.toLowerCase() === 'client') return out
    const at = performance.now() - t.t0
    const name = c.name.toLowerCase()
    const what = `${name}${name === 'evalsha' ? scriptName(this, c.args[0]) : ''} ${firstKey(c, t.prefix)}`
    const isPipeline = (stream as { isPipeline?: boolean } | undefined)?.isPipeline === true
    if (isPipeline && batch && batch.stream === stream) {
      batch.entry.what += ` + ${what}`
      batch.pending.push(c.promise)
    } else {
      const entry: TraceEntry = { kind: 'redis', what, at, end: null }
      t.entries.push(entry)
      const b = { stream, entry, pending: [c.promise] }
      if (isPipeline) {
        batch = b
        queueMicrotask(() => {
          if (batch === b) batch = null
        })
      }
      // The round trip ends with the last reply of its batch (known once the batch is complete).
      queueMicrotask(() => {
        void Promise.allSettled(b.pending).then(() => {
          entry.end = performance.now() - t.t0
        })
      })
    }
    return out
  }
  // dockerode speaks HTTP over the engine's socket: each request is one Docker API call.
  const docker = new WeakMap<ClientRequest, TraceEntry>()
  diagnostics.subscribe('http.client.request.start', (msg) => {
    const t = current
    const req = (msg as { request: ClientRequest }).request
    if (!t) return
    const entry: TraceEntry = {
      kind: 'docker',
      what: `${req.method} ${req.path.replace(/\?.*$/, '').replace(/[0-9a-f]{64}/, '<id>')}`,
      at: performance.now() - t.t0,
      end: null,
    }
    docker.set(req, entry)
    t.entries.push(entry)
  })
  diagnostics.subscribe('http.client.response.finish', (msg) => {
    const t = current
    const { request } = msg as { request: ClientRequest; response: IncomingMessage }
    const entry = docker.get(request)
    if (t && entry) entry.end = performance.now() - t.t0
  })
  // The API's side of the request: in, the route's handler starting (after auth, rate limit,
  // placement and validation), and the response written.
  // The benchmark's own polling of /metrics is left out.
  const api = (req: { url?: string }) => !req.url?.startsWith('/metrics')
  diagnostics.subscribe('http.server.request.start', (m) => api((m as { request: IncomingMessage }).request) && mark('server: request in'))
  diagnostics.subscribe('tracing:fastify.request.handler:start', (m) => api((m as { request: { url?: string } }).request) && mark('server: handler starts'))
  diagnostics.subscribe('http.server.response.finish', (m) => api((m as { request: IncomingMessage }).request) && mark('server: response finished'))
}

/** Starts recording (keys are shown without `prefix`); what `run` caused is returned with it. */
export async function traced<T>(prefix: string, run: () => Promise<T>): Promise<{ value: T; entries: TraceEntry[]; ms: number }> {
  install()
  const t = { t0: performance.now(), entries: [] as TraceEntry[], prefix }
  current = t
  try {
    const value = await run()
    return { value, entries: t.entries, ms: performance.now() - t.t0 }
  } finally {
    current = null
  }
}

/** Marks a moment of the caller's own (the reply's headers, its end) in the running trace. */
export function mark(what: string): void {
  const t = current
  if (t) t.entries.push({ kind: 'http', what, at: performance.now() - t.t0, end: null })
}

/** A phase of a request: its label, the entry that ends it, and whether it ends where that entry begins or ends. */
export type Phase = [label: string, endsAt: RegExp, which: 'at' | 'end']

/** Milliseconds each phase of a trace took, each from where the one before it ended (NaN where the trace lacks its entry). */
export function phaseTimes(trace: TraceEntry[], phases: Phase[]): number[] {
  let prev = 0
  return phases.map(([, re, which]) => {
    const e = trace.find((x) => re.test(x.what))
    const t = e ? (which === 'end' ? (e.end ?? e.at) : e.at) : NaN
    const ms = t - prev
    if (!Number.isNaN(t)) prev = t
    return ms
  })
}

/** The median of the samples that have a value (NaN: a trace lacked the phase). */
export function phaseMedian(xs: number[]): number {
  const s = xs.filter((x) => !Number.isNaN(x)).sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)] ?? NaN
}

/** When the API finished writing the trace's first response (Infinity: none did). */
export function firstResponse(entries: TraceEntry[]): number {
  return entries.find((e) => e.kind === 'http' && e.what === 'server: response finished')?.at ?? Infinity
}

/** Redis round trips in a trace that began before `untilMs` (those after it did not delay the reply). */
export function roundTrips(entries: TraceEntry[], untilMs = Infinity): number {
  return entries.filter((e) => e.kind === 'redis' && e.at < untilMs).length
}

/**
 * Redis round trips that waited one after the other: an entry sent while another was still in flight
 * overlaps it and adds no wait of its own.
 */
export function sequentialRoundTrips(entries: TraceEntry[], untilMs = Infinity): number {
  let n = 0
  let busyUntil = -1
  for (const e of entries.filter((x) => x.kind === 'redis' && x.at < untilMs).sort((a, b) => a.at - b.at)) {
    if (e.at >= busyUntil) n++
    busyUntil = Math.max(busyUntil, e.end ?? e.at)
  }
  return n
}

export function dockerCalls(entries: TraceEntry[], untilMs = Infinity): number {
  return entries.filter((e) => e.kind === 'docker' && e.at < untilMs).length
}

/** The trace as lines: start, duration and what, in the order things started. */
export function timeline(entries: TraceEntry[]): string[] {
  return [...entries]
    .sort((a, b) => a.at - b.at)
    .map((e) => {
      const dur = e.end === null ? '' : `${(e.end - e.at).toFixed(2)} ms`
      return `  ${e.at.toFixed(2).padStart(8)} ms  ${dur.padStart(10)}  ${e.kind.padEnd(6)} ${e.what}`
    })
}
