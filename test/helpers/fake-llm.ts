// A scripted OpenAI-compatible chat-completions server for tests: node:http on 127.0.0.1,
// port 0. Each incoming request is handed to the next handler the test queued (or the
// fallback); handlers stream real `data: {chunk}\n\n ... data: [DONE]\n\n` bodies.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { API_KEY } from './app.js'
import { readSse, type SseEvent } from './client.js'

interface ChatRequest {
  body: any
  messages: Array<{ role: string; content: string }>
  stream: boolean
  /** The whole request body as received (to check what reached the model). */
  raw: string
  /** Resolves when the request's connection closes: answered, or given up by the client. */
  closed: Promise<void>
}

export type Handler = (req: ChatRequest, res: FakeResponse) => Promise<void> | void

/** A deferred: tests hold a stream with `gate.promise` and release it with `gate.open()`. */
export function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void
  const promise = new Promise<void>((r) => {
    open = r
  })
  return { promise, open }
}

let chunkNo = 0

export class FakeResponse {
  private started = false
  readonly id = `chatcmpl-fake-${++chunkNo}`
  constructor(
    readonly raw: ServerResponse,
    private readonly model: string,
  ) {}

  private begin(): void {
    if (this.started) return
    this.started = true
    this.raw.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' })
    this.data({
      id: this.id,
      object: 'chat.completion.chunk',
      created: 1,
      model: this.model,
      choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }],
    })
  }

  /** Writes one `data:` line with a raw JSON value. */
  data(value: unknown): void {
    this.raw.write(`data: ${typeof value === 'string' ? value : JSON.stringify(value)}\n\n`)
  }

  /** Streams one content delta (starting the response if needed). */
  token(text: string): void {
    this.begin()
    this.data({
      id: this.id,
      object: 'chat.completion.chunk',
      created: 1,
      model: this.model,
      choices: [{ index: 0, delta: { content: text }, finish_reason: null }],
    })
  }

  /** Ends the stream properly: finish_reason, usage, [DONE]. */
  end(usage = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 }): void {
    this.begin()
    this.data({ id: this.id, object: 'chat.completion.chunk', created: 1, model: this.model, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })
    this.data({ id: this.id, object: 'chat.completion.chunk', created: 1, model: this.model, choices: [], usage })
    this.raw.write('data: [DONE]\n\n')
    this.raw.end()
  }

  /** Streams `tokens` then ends. */
  stream(tokens: string[], usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number }): void {
    for (const t of tokens) this.token(t)
    this.end(usage)
  }

  /** A non-streaming completion (llm_query sub-calls). */
  json(text: string, usage = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 }): void {
    this.started = true
    this.raw.writeHead(200, { 'content-type': 'application/json' })
    this.raw.end(
      JSON.stringify({
        id: this.id,
        object: 'chat.completion',
        created: 1,
        model: this.model,
        choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }],
        usage,
      }),
    )
  }

  /** Answers with an HTTP error; the client is told not to retry unless `retry`. */
  fail(status: number, message = 'scripted failure', retry = false): void {
    this.started = true
    this.raw.writeHead(status, { 'content-type': 'application/json', 'x-should-retry': String(retry), 'retry-after-ms': '0' })
    this.raw.end(JSON.stringify({ error: { message, type: 'server_error', code: null } }))
  }

  /** Cuts the connection without finishing the stream (after what was written has been sent). */
  async cut(): Promise<void> {
    await new Promise<void>((r) => this.raw.write('', () => r()))
    this.raw.socket?.destroy()
  }

  begun(): void {
    this.begin()
  }
}

export interface FakeLlm {
  baseURL: string
  requests: ChatRequest[]
  /** Queues handlers for the next requests, in order. */
  script(...handlers: Handler[]): void
  /** Handler used when the script is empty. */
  fallback: Handler
  /** Most requests in flight at once so far. */
  maxInFlight: number
  inFlight: number
  /** Resolves when the n-th request (1-based) has arrived. */
  requestArrived(n: number): Promise<ChatRequest>
  close(): Promise<void>
}

/** Code as a model would stream it: a few characters per token. */
export function tokens(text: string, size = 4): string[] {
  const out: string[] = []
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size))
  return out
}

export async function startFakeLlm(): Promise<FakeLlm> {
  const queue: Handler[] = []
  const waiters: Array<{ n: number; resolve: (r: ChatRequest) => void }> = []
  const sockets = new Set<import('node:net').Socket>()
  const llm: FakeLlm = {
    baseURL: '',
    requests: [],
    maxInFlight: 0,
    inFlight: 0,
    fallback: (_req, res) => res.stream(['print("fallback")\n']),
    script: (...h) => {
      queue.push(...h)
    },
    requestArrived: (n) =>
      new Promise((resolve) => {
        const r = llm.requests[n - 1]
        if (r) resolve(r)
        else waiters.push({ n, resolve })
      }),
    close: async () => {
      for (const s of sockets) s.destroy()
      await new Promise<void>((r) => server.close(() => r()))
    },
  }
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const parts: Buffer[] = []
    req.on('data', (c: Buffer) => parts.push(c))
    req.on('end', () => {
      const raw = Buffer.concat(parts).toString('utf8')
      let body: any = {}
      try {
        body = JSON.parse(raw)
      } catch {
        /* keep empty */
      }
      const closed = new Promise<void>((r) => res.on('close', () => r()))
      const cr: ChatRequest = { body, messages: body.messages ?? [], stream: body.stream === true, raw, closed }
      llm.requests.push(cr)
      for (const w of [...waiters])
        if (llm.requests.length >= w.n) {
          waiters.splice(waiters.indexOf(w), 1)
          w.resolve(llm.requests[w.n - 1]!)
        }
      llm.inFlight++
      llm.maxInFlight = Math.max(llm.maxInFlight, llm.inFlight)
      res.on('close', () => {
        llm.inFlight--
      })
      const handler = queue.shift() ?? llm.fallback
      Promise.resolve(handler(cr, new FakeResponse(res, String(body.model ?? 'fake')))).catch(() => res.socket?.destroy())
    })
  })
  server.on('connection', (s) => {
    sockets.add(s)
    s.on('close', () => sockets.delete(s))
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()))
  llm.baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`
  return llm
}

/** POSTs a message with Accept: text/event-stream and reads the turn's events (see readSse's `until`). */
export async function postMessage(
  base: string,
  sid: string,
  body: Record<string, unknown>,
  opts: { key?: string; until?: (e: SseEvent) => boolean; signal?: AbortSignal } = {},
): Promise<{ status: number; location: string | null; events: SseEvent[]; problem?: any }> {
  const res = await fetch(`${base}/v1/sessions/${sid}/messages`, {
    method: 'POST',
    headers: { authorization: `Bearer ${opts.key ?? API_KEY}`, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify(body),
    signal: opts.signal,
  })
  if (res.status !== 200) return { status: res.status, location: null, events: [], problem: await res.json() }
  return { status: res.status, location: res.headers.get('location'), events: await readSse(res, opts.until ?? ((e) => e.event === 'done')) }
}

export const ofType = (events: SseEvent[], type: string) => events.filter((e) => e.event === type)
export const codeOf = (events: SseEvent[]) =>
  ofType(events, 'code')
    .map((e) => e.data.delta)
    .join('')
