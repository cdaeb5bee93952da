// The hop from the instance that received a request to the one that must answer it: the raw request
// (method, path and query, headers, body streamed) goes over a keep-alive connection to the holder's
// advertised origin with the hop's signature (hop-auth.ts), and the answer (status, headers, body
// streamed, SSE included) comes back with backpressure. Only the request's path and query travel: a
// target in absolute form never gets this far (http/request-target.ts), and none would choose the host.
import { Agent, request, type ClientRequest, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http'

/** Marks a request passed on by another instance (its value is the hop's signature): it is never passed on again. */
export const FORWARDED_HEADER = 'x-replcast-forwarded'
/** On an answer: the instance does not hold the session (the lease moved meanwhile); the hop is tried again. */
export const REFUSED_HEADER = 'x-replcast-refused'

/** Headers that belong to one connection, not to the request or answer they carry. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'expect',
  'host',
  FORWARDED_HEADER,
  REFUSED_HEADER,
])

/**
 * answered: the answer went (or is going) to the client; gone: the client left first; refused: the
 * other instance does not hold the session or is stopping; unreachable: no answer came (`reused`:
 * on a kept-alive connection the other side had just closed, worth an immediate second try;
 * `reached`: the connection was up when it broke, so the other instance may have acted on the request).
 */
/** The signature of a hop of `method path` (HopAuth.sign). */
export type HopSigner = (method: string, path: string) => string

export type HopOutcome = { kind: 'answered' | 'gone' | 'refused' } | { kind: 'unreachable'; reused: boolean; reached: boolean; err: Error }

/**
 * A request's body as it is read for hops: the first `keepBytes` are kept, so that a hop that was
 * refused can be tried again; past that, a refused hop cannot be repeated.
 */
export class HopBody {
  private readonly kept: Buffer[] = []
  private read = 0
  constructor(
    private readonly source: IncomingMessage,
    private readonly keepBytes: number,
  ) {}

  /** Some of the body was read (the request can no longer be answered here by the route itself). */
  get started(): boolean {
    return this.read > 0 || this.source.readableEnded
  }
  /** Everything read so far was kept. */
  get replayable(): boolean {
    return this.read <= this.keepBytes
  }

  /** Writes what was kept, then the rest as it arrives, with backpressure; returns a function that stops it. */
  pipeTo(up: ClientRequest): () => void {
    const { source } = this
    for (const c of this.kept) up.write(c)
    if (!hasBody(source) || source.readableEnded) {
      up.end()
      return () => undefined
    }
    const onData = (c: Buffer) => {
      this.read += c.length
      if (this.read <= this.keepBytes) this.kept.push(c)
      if (!up.write(c)) {
        source.pause()
        up.once('drain', () => source.resume())
      }
    }
    const onEnd = () => up.end()
    source.on('data', onData)
    source.once('end', onEnd)
    source.resume()
    return () => {
      source.off('data', onData)
      source.off('end', onEnd)
      source.pause()
    }
  }
}

/** A body read whole before the hop (POST /mcp, whose session is named in its body): sent as it is, as often as the hop is tried. */
export class BufferedBody {
  readonly started = false
  readonly replayable = true
  constructor(private readonly bytes: Buffer) {}

  pipeTo(up: ClientRequest): () => void {
    up.end(this.bytes)
    return () => undefined
  }
}

function hasBody(req: IncomingMessage): boolean {
  return req.headers['transfer-encoding'] !== undefined || (req.headers['content-length'] !== undefined && req.headers['content-length'] !== '0')
}

/** The headers that go on past a hop: none of the hop-by-hop ones, nor those the `Connection` header names. */
export function pass(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const named = new Set(
    String(headers.connection ?? '')
      .split(',')
      .map((t) => t.trim().toLowerCase())
      .filter(Boolean),
  )
  const out: Record<string, string | string[]> = {}
  for (const [k, v] of Object.entries(headers)) if (v !== undefined && !HOP_BY_HOP.has(k) && !named.has(k)) out[k] = v
  return out
}

/** Host and port of an advertised origin (`http://host:port`), for a request that names its own path. */
export function originOf(url: string): { hostname: string; port: string } {
  const u = new URL(url)
  if (u.protocol !== 'http:') throw new Error(`an instance's advertised URL must be http: (${url})`)
  return { hostname: u.hostname.replace(/^\[(.*)\]$/, '$1'), port: u.port || '80' }
}

/** Whether the other instance declined the request without handling it. */
export function declined(res: IncomingMessage): boolean {
  if (res.headers[REFUSED_HEADER] !== undefined) return true
  // A closing instance marks its 503 refused (http/closing.ts); one of an earlier version answered
  // Fastify's own 503 in plain JSON (replcast's errors are all problem+json).
  return res.statusCode === 503 && (res.headers['content-type'] ?? '').startsWith('application/json')
}

/**
 * The answer's body to the client as it arrives, with backpressure. The head leaves with the body's
 * first chunk when both came together (one write for the client), alone when the body waits.
 * `finished`: the client has the whole answer.
 */
export function relay(from: IncomingMessage, to: ServerResponse, finished: () => void): void {
  let started = false
  setImmediate(() => {
    if (!started && !to.writableEnded && !to.destroyed) to.flushHeaders()
  })
  // A chunk waits for the microtasks of its read: when the end of the answer came in the same read
  // (a last event, often), the two leave in one write.
  let held: Buffer[] = []
  const send = () => {
    const chunks = held
    held = []
    for (const c of chunks) {
      if (to.write(c)) continue
      from.pause()
      to.once('drain', () => from.resume())
    }
  }
  from.on('data', (chunk: Buffer) => {
    started = true
    if (held.push(chunk) === 1) queueMicrotask(send)
  })
  from.once('end', () => {
    const rest = held
    held = []
    if (rest.length) to.end(Buffer.concat(rest))
    else to.end()
  })
  // The other instance went away in the middle of the answer: the client sees the cut.
  from.on('error', () => to.destroy())
  from.once('close', () => {
    if (!from.complete) to.destroy()
  })
  to.once('finish', finished)
}

export class Forwarder {
  private readonly agent = new Agent({ keepAlive: true, maxFreeSockets: 64, scheduling: 'lifo', noDelay: true })
  /** Hops under way: ended when the instance stops (their clients resume elsewhere). */
  private readonly open = new Set<() => void>()

  /**
   * Passes `req` to the instance at `origin` and its answer back on `res`: its path and query as they
   * came (origin-form), signed by `sign`. `onAnswer` is called once, just before anything is written
   * to `res` (or when the client left): from then on the request is this hop's.
   */
  forward(req: IncomingMessage, res: ServerResponse, origin: string, sign: HopSigner, body: HopBody | BufferedBody, onAnswer: () => void): Promise<HopOutcome> {
    return new Promise((resolve) => {
      const path = req.url ?? ''
      const method = req.method ?? 'GET'
      let to: ReturnType<typeof originOf>
      try {
        if (!path.startsWith('/')) throw new Error('only an origin-form request target is passed on')
        to = originOf(origin)
      } catch (err) {
        resolve({ kind: 'unreachable', reused: false, reached: false, err: err as Error })
        return
      }
      const headers = { ...pass(req.headers), [FORWARDED_HEADER]: sign(method, path) }
      const up = request({ ...to, path, method, headers, agent: this.agent })
      let stopBody = () => {}
      let settled = false
      let answering = false
      const answer = () => {
        if (answering) return
        answering = true
        onAnswer()
      }
      const settle = (o: HopOutcome) => {
        if (settled) return
        settled = true
        stopBody()
        res.off('close', clientGone)
        this.open.delete(end)
        resolve(o)
      }
      const end = () => {
        up.destroy()
        res.destroy()
      }
      // A client that leaves ends the hop (and so the other instance's handling of it).
      const clientGone = () => {
        if (res.writableFinished) return
        up.destroy()
        answer()
        settle({ kind: 'gone' })
      }
      res.once('close', clientGone)
      this.open.add(end)
      // The body is read only once the connection is up: a hop refused at connect consumes none of it.
      let reached = false
      const send = () => {
        reached = true
        stopBody = body.pipeTo(up)
      }
      up.once('socket', (s) => {
        if (s.connecting) s.once('connect', send)
        else send()
      })
      up.once('response', (reply) => {
        if (declined(reply)) {
          reply.resume()
          up.destroy()
          settle({ kind: 'refused' })
          return
        }
        answer()
        // The rest of the body still goes up (an upload the other side answers only at its end).
        stopBody = () => {}
        res.writeHead(reply.statusCode ?? 502, pass(reply.headers))
        relay(reply, res, () => settle({ kind: 'answered' }))
      })
      up.on('error', (err) => {
        // Once the answer has begun, it is cut short: the client sees the cut.
        if (answering) res.destroy()
        else settle({ kind: 'unreachable', reused: up.reusedSocket, reached, err })
      })
    })
  }

  /**
   * A request of this instance's own (no client request behind it) to the instance at `origin`,
   * signed like a hop, over the same kept-alive connections: its status and its body parsed as JSON
   * (null when empty or not JSON). Rejects when no answer came.
   */
  call(origin: string, method: string, path: string, headers: Record<string, string>, sign: HopSigner): Promise<{ status: number; body: unknown }> {
    return new Promise((resolve, reject) => {
      const up = request({ ...originOf(origin), path, method, headers: { ...headers, [FORWARDED_HEADER]: sign(method, path) }, agent: this.agent })
      const end = () => up.destroy(new Error('the API instance is stopping'))
      this.open.add(end)
      up.once('close', () => this.open.delete(end))
      up.once('response', (reply) => {
        const chunks: Buffer[] = []
        reply.on('data', (c: Buffer) => chunks.push(c))
        reply.once('error', reject)
        reply.once('end', () => {
          let body: unknown = null
          try {
            body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : null
          } catch {
            body = null
          }
          resolve({ status: reply.statusCode ?? 502, body })
        })
      })
      up.once('error', reject)
      up.end()
    })
  }

  /** Ends every hop under way and the kept-alive connections. */
  close(): void {
    for (const end of this.open) end()
    this.open.clear()
    this.agent.destroy()
  }
}
