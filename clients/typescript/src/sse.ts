// A Server-Sent Events parser (the WHATWG event-stream format): text in, in any pieces; whole
// messages out. Lines end in \n, \r\n or \r; comments (heartbeats) are skipped.

export interface SseMessage {
  /** The `event:` field ('message' when absent). */
  event: string
  /** The `data:` lines joined with \n. */
  data: string
  /** The `id:` field of this message ('' when it had none). */
  id: string
  /** The `retry:` field in milliseconds, when given. */
  retry?: number
}

export class SseParser {
  private buf = ''
  private pendingCr = false
  private event = ''
  private data: string[] = []
  private id = ''
  private retry: number | undefined

  /** Feeds decoded text; returns the messages it completed. */
  push(text: string): SseMessage[] {
    const out: SseMessage[] = []
    let s = text
    // A \r that ended the previous piece already ended its line: a \n right after it belongs to it.
    if (this.pendingCr && s.startsWith('\n')) s = s.slice(1)
    this.pendingCr = false
    this.buf += s
    for (;;) {
      const m = /\r\n|\r|\n/.exec(this.buf)
      if (!m) break
      // A lone \r at the very end may be the first half of \r\n: take the line, remember to drop a leading \n.
      if (m[0] === '\r' && m.index === this.buf.length - 1) this.pendingCr = true
      const line = this.buf.slice(0, m.index)
      this.buf = this.buf.slice(m.index + m[0].length)
      const msg = this.line(line)
      if (msg) out.push(msg)
    }
    return out
  }

  private line(line: string): SseMessage | null {
    if (line === '') return this.dispatch()
    if (line.startsWith(':')) return null
    const colon = line.indexOf(':')
    const field = colon === -1 ? line : line.slice(0, colon)
    let value = colon === -1 ? '' : line.slice(colon + 1)
    if (value.startsWith(' ')) value = value.slice(1)
    if (field === 'event') this.event = value
    else if (field === 'data') this.data.push(value)
    else if (field === 'id' && !value.includes('\0')) this.id = value
    else if (field === 'retry' && /^\d+$/.test(value)) this.retry = Number(value)
    return null
  }

  private dispatch(): SseMessage | null {
    const msg: SseMessage | null =
      this.data.length || this.event || this.id
        ? { event: this.event || 'message', data: this.data.join('\n'), id: this.id, ...(this.retry !== undefined ? { retry: this.retry } : {}) }
        : null
    this.event = ''
    this.data = []
    this.id = ''
    this.retry = undefined
    return msg
  }
}

/** The messages of a response body as they arrive. Throws what reading throws (a dropped connection). */
export async function* readSse(body: ReadableStream<Uint8Array>): AsyncGenerator<SseMessage> {
  const parser = new SseParser()
  const decoder = new TextDecoder()
  const reader = body.getReader()
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      yield* parser.push(decoder.decode(value, { stream: true }))
    }
  } finally {
    // Leaving early (the caller stopped iterating) must not leave the connection open.
    await reader.cancel().catch(() => undefined)
  }
}
