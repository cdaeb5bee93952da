// Sends one fuzz request and reads its answer within a deadline: JSON and problem bodies whole, event
// streams until `done` or a short deadline (then the stream is aborted), raw HTTP over a socket.
import { connect } from 'node:net'
import type { Spec } from './requests.js'

interface SseFrame {
  id: string
  event: string
  data: string
}

export interface Answer {
  /** 0 when no answer arrived. */
  status: number
  contentType: string
  headers: Record<string, string>
  text: string
  events: SseFrame[]
  /** The stream ended on its own (not cut by our deadline). */
  complete: boolean
  /** The connection failed (reset, closed early) rather than answering. */
  error?: string
  /** No status line arrived within the deadline. */
  timedOut?: boolean
  ms: number
}

export interface SendOptions {
  /** How long an event stream is read before it is aborted. */
  sseMs: number
  /** How long any answer may take to arrive whole (event streams excepted). */
  answerMs: number
}

export async function send(base: string, spec: Spec, opts: SendOptions): Promise<Answer> {
  if (spec.raw) return sendRaw(base, spec.raw, opts.answerMs)
  const t0 = performance.now()
  const ac = new AbortController()
  let deadline = setTimeout(() => ac.abort(new Error('deadline')), opts.answerMs)
  const answer: Answer = { status: 0, contentType: '', headers: {}, text: '', events: [], complete: false, ms: 0 }
  try {
    const res = await fetch(base + spec.url, {
      method: spec.method,
      headers: Object.entries(spec.headers),
      body: spec.method === 'GET' || spec.method === 'HEAD' || !spec.body ? undefined : new Uint8Array(spec.body),
      signal: ac.signal,
    })
    answer.status = res.status
    answer.headers = Object.fromEntries(res.headers)
    answer.contentType = res.headers.get('content-type') ?? ''
    const sse = answer.contentType.startsWith('text/event-stream')
    if (sse) {
      clearTimeout(deadline)
      deadline = setTimeout(() => ac.abort(new Error('deadline')), opts.sseMs)
    }
    const reader = res.body?.getReader()
    const decoder = new TextDecoder()
    for (;;) {
      let chunk: ReadableStreamReadResult<Uint8Array>
      try {
        if (!reader) break
        chunk = await reader.read()
      } catch (err) {
        if (ac.signal.aborted && sse) break // our deadline on a live stream: a normal end for the fuzzer
        throw err
      }
      if (chunk.done) {
        answer.complete = true
        break
      }
      answer.text += decoder.decode(chunk.value, { stream: true })
      if (sse && answer.text.length > 4_000_000) break
      if (sse && /(^|\n)event: done\n/.test(answer.text) && answer.text.endsWith('\n\n')) {
        answer.complete = true
        await reader.cancel().catch(() => undefined)
        break
      }
    }
    if (sse) answer.events = parseSse(answer.text)
  } catch (err) {
    if (answer.status === 0 && ac.signal.aborted) answer.timedOut = true
    else answer.error = describe(err)
  } finally {
    clearTimeout(deadline)
    if (!ac.signal.aborted) ac.abort()
  }
  answer.ms = performance.now() - t0
  return answer
}

function describe(err: unknown): string {
  const e = err as { message?: string; cause?: { code?: string; message?: string } }
  return `${e.message ?? String(err)}${e.cause ? ` (${e.cause.code ?? ''} ${e.cause.message ?? ''})` : ''}`
}

function parseSse(text: string): SseFrame[] {
  const out: SseFrame[] = []
  for (const block of text.split('\n\n')) {
    const f: SseFrame = { id: '', event: 'message', data: '' }
    const data: string[] = []
    for (const line of block.split('\n')) {
      if (!line || line.startsWith(':')) continue
      const i = line.indexOf(':')
      const field = i < 0 ? line : line.slice(0, i)
      const value = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '')
      if (field === 'id') f.id = value
      else if (field === 'event') f.event = value
      else if (field === 'data') data.push(value)
    }
    if (!data.length) continue
    f.data = data.join('\n')
    out.push(f)
  }
  return out
}

/** Writes the bytes as they are and reads until the server closes the connection or the deadline. */
function sendRaw(base: string, bytes: Buffer, ms: number): Promise<Answer> {
  const url = new URL(base)
  const t0 = performance.now()
  return new Promise((resolve) => {
    const parts: Buffer[] = []
    let error: string | undefined
    const sock = connect(Number(url.port), url.hostname)
    const timer = setTimeout(() => sock.destroy(), ms)
    // A request that asks the server to close is not half-closed: Node aborts a request whose client
    // ended its side before the answer. The others (malformed) are, so a parser that waits for more sees the end.
    const asksToClose = bytes.includes('\r\nConnection: close\r\n')
    sock.on('connect', () => {
      sock.write(bytes)
      if (!asksToClose) sock.end()
    })
    sock.on('data', (b: Buffer) => parts.push(b))
    sock.on('error', (e) => {
      error = e.message
    })
    sock.on('close', () => {
      clearTimeout(timer)
      const text = Buffer.concat(parts).toString('latin1')
      const head = text.split('\r\n\r\n')[0] ?? ''
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1] ?? 0)
      const headers: Record<string, string> = {}
      for (const line of head.split('\r\n').slice(1)) {
        const i = line.indexOf(':')
        if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim()
      }
      resolve({
        status,
        contentType: headers['content-type'] ?? '',
        headers,
        text: text.slice(head.length + 4),
        events: [],
        complete: true,
        error: status ? undefined : (error ?? 'closed without an answer'),
        ms: performance.now() - t0,
      })
    })
  })
}
