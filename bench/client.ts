// The benchmarks' HTTP client (issue 11): node:http over keep-alive connections (less cost of its own
// than fetch, and the same for a figure and its HTTP baseline), JSON calls, sessions, and executions
// over SSE whose events are timestamped as they arrive; optionally read slowly, as a slow client would.
import http from 'node:http'

const agent = new http.Agent({ keepAlive: true, maxSockets: 2048 })

export interface Target {
  base: string
  headers: Record<string, string>
}

export interface SseEvent {
  event: string
  data: any
  /** performance.now() when the event was parsed. */
  at: number
}

interface Reply {
  status: number
  res: http.IncomingMessage
}

function send(t: Target, method: string, path: string, body: string | undefined, extra: Record<string, string> = {}): Promise<Reply> {
  const headers = { ...t.headers, ...extra }
  // A JSON content-type with no body is a 400 at Fastify.
  if (body === undefined) delete headers['content-type']
  return new Promise((resolve, reject) => {
    const req = http.request(`${t.base}${path}`, { method, agent, headers }, (res) => resolve({ status: res.statusCode ?? 0, res }))
    req.on('error', reject)
    req.end(body)
  })
}

function readAll(res: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = ''
    res.setEncoding('utf8')
    res.on('data', (s: string) => (text += s))
    res.on('end', () => resolve(text))
    res.on('error', reject)
  })
}

/** One JSON call; the body parsed when it is JSON. */
export async function call(t: Target, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const r = await send(t, method, path, body === undefined ? undefined : JSON.stringify(body))
  const text = await readAll(r.res)
  try {
    return { status: r.status, body: text ? JSON.parse(text) : null }
  } catch {
    return { status: r.status, body: text }
  }
}

/** GET /healthz over a kept-alive connection: what one HTTP request costs with no work behind it. */
export async function healthz(t: Target): Promise<void> {
  const r = await send(t, 'GET', '/healthz', undefined)
  await readAll(r.res)
  if (r.status !== 200) throw new Error(`healthz answered ${r.status}`)
}

/** Creates a session (201) and answers its id; throws with the problem otherwise. */
export async function createSession(t: Target, body: object = {}): Promise<string> {
  const r = await call(t, 'POST', '/v1/sessions', body)
  if (r.status !== 201) throw new Error(`session create answered ${r.status}: ${JSON.stringify(r.body)}`)
  return (r.body as { id: string }).id
}

export async function deleteSession(t: Target, sid: string): Promise<void> {
  await call(t, 'DELETE', `/v1/sessions/${sid}`)
}

export interface RunOptions {
  timeout_s?: number
  /** python (the default) or bash. */
  language?: 'python' | 'bash'
  /** Called with each event as it is parsed (JSON data); return true to stop reading (the connection is closed). */
  onEvent?: (e: SseEvent) => boolean | void
  /** Read no faster than this many bytes per second (a slow client: TCP's backpressure reaches the server). */
  bytesPerSecond?: number
  /** Stop reading (close the connection) this many ms after the POST. */
  abortAfterMs?: number
}

export interface Run {
  status: number
  /** performance.now() when the request was sent and when `done` arrived (NaN: none). */
  t0: number
  doneAt: number
  /** Bytes of the SSE body read. */
  bytes: number
}

/** POSTs an execution with Accept: text/event-stream and reads its events until the stream ends. */
export async function execute(t: Target, sid: string, code: string, opts: RunOptions = {}): Promise<Run> {
  const t0 = performance.now()
  const body = JSON.stringify({ code, ...(opts.timeout_s ? { timeout_s: opts.timeout_s } : {}), ...(opts.language ? { language: opts.language } : {}) })
  const { status, res } = await send(t, 'POST', `/v1/sessions/${sid}/executions`, body, { accept: 'text/event-stream' })
  if (status !== 200) throw new Error(`execution answered ${status}: ${await readAll(res)}`)
  const run: Run = { status, t0, doneAt: NaN, bytes: 0 }
  return new Promise((resolve, reject) => {
    let buf = ''
    let stopped = false
    const stop = () => {
      if (stopped) return
      stopped = true
      res.destroy()
      resolve(run)
    }
    if (opts.abortAfterMs !== undefined) setTimeout(stop, opts.abortAfterMs)
    res.setEncoding('utf8')
    res.on('data', (chunk: string) => {
      run.bytes += Buffer.byteLength(chunk)
      buf += chunk
      let idx
      while (!stopped && (idx = buf.indexOf('\n\n')) !== -1) {
        const block = buf.slice(0, idx)
        buf = buf.slice(idx + 2)
        const at = performance.now()
        let event = 'message'
        let data = ''
        for (const line of block.split('\n')) {
          if (line.startsWith('event:')) event = line.slice(6).trim()
          else if (line.startsWith('data:')) data += line.slice(5).replace(/^ /, '')
        }
        if (!data) continue
        if (event === 'done') run.doneAt = at
        // Parsed only for a caller that looks at events (a slow reader's figure should not include JSON.parse).
        if (opts.onEvent?.({ event, data: JSON.parse(data), at })) stop()
      }
      if (opts.bytesPerSecond && !stopped) {
        res.pause()
        setTimeout(() => res.resume(), (Buffer.byteLength(chunk) / opts.bytesPerSecond) * 1000)
      }
    })
    res.on('end', () => {
      stopped = true
      resolve(run)
    })
    res.on('error', (err) => (stopped ? resolve(run) : reject(err)))
  })
}

/** print(1) over SSE: ms from the POST to its `done` (the rest of the stream is read, not counted). */
export async function printOne(t: Target, sid: string): Promise<number> {
  const r = await execute(t, sid, 'print(1)')
  if (Number.isNaN(r.doneAt)) throw new Error('print(1) ended without a done event')
  return r.doneAt - r.t0
}

/** Runs `fn` for items in batches of `size` at once (creates of many sessions without a stampede). */
export async function inBatches<T, R>(items: T[], size: number, fn: (item: T) => Promise<R>): Promise<PromiseSettledResult<R>[]> {
  const out: PromiseSettledResult<R>[] = []
  for (let i = 0; i < items.length; i += size) out.push(...(await Promise.allSettled(items.slice(i, i + size).map(fn))))
  return out
}
