// Speaks the REPL protocol over any transport: request ids with timeouts, execution frames
// routed by exec_id, a defensive parser (bounded lines, bad frames dropped and logged), and
// on close every pending request fails with ReplClosedError.
import { randomUUID } from 'node:crypto'
import type { Logger } from 'pino'
import { LineDecoder } from './line-decoder.js'
import { encodeFrame, MAX_FRAME_BYTES, PROTOCOL_VERSION, type LlmRequestFrame, type ReplFrame } from './protocol.js'
import type { ReplTransport } from './transport.js'

export class ReplClosedError extends Error {
  constructor(msg = 'the REPL channel closed') {
    super(msg)
    this.name = 'ReplClosedError'
  }
}
export class ReplTimeoutError extends Error {
  constructor(what: string) {
    super(`the REPL did not answer ${what} in time`)
    this.name = 'ReplTimeoutError'
  }
}
export class ReplRequestError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message)
    this.name = 'ReplRequestError'
  }
}

type FrameSink = (frame: ReplFrame) => void

interface Pending {
  resolve: (f: ReplFrame) => void
  reject: (e: Error) => void
  timer: NodeJS.Timeout
}

export class ReplClient {
  readonly ready: Promise<ReplFrame>
  private readonly pending = new Map<string, Pending>()
  private readonly executions = new Map<string, FrameSink>()
  private readonly closeCbs: Array<(err?: Error) => void> = []
  private llmHandler: ((f: LlmRequestFrame) => void) | null = null
  private lastSeq = -1
  private closedWith: Error | null = null
  private resolveReady!: (f: ReplFrame) => void

  constructor(
    private readonly transport: ReplTransport,
    private readonly log: Logger,
    opts: { readyTimeoutMs: number; expectReady?: boolean },
  ) {
    let rejectReady!: (e: Error) => void
    this.ready = new Promise<ReplFrame>((resolve, reject) => {
      this.resolveReady = resolve
      rejectReady = reject
    })
    this.ready.catch(() => undefined)
    const decoder = new LineDecoder(
      MAX_FRAME_BYTES,
      (line) => this.onLine(line),
      (bytes) => this.log.warn({ bytes }, 'repl: oversized frame dropped'),
    )
    transport.onData((chunk) => decoder.push(chunk))
    transport.onClose((err) => this.onClosed(err, rejectReady))
    if (opts.expectReady === false) {
      this.resolveReady({ v: PROTOCOL_VERSION, type: 'ready' })
    } else {
      const t = setTimeout(() => rejectReady(new ReplTimeoutError('ready')), opts.readyTimeoutMs)
      t.unref()
      void this.ready.then(
        () => clearTimeout(t),
        () => clearTimeout(t),
      )
    }
  }

  /** Sends a request and resolves with its reply; rejects ReplRequestError, ReplTimeoutError or ReplClosedError. */
  request(type: string, fields: Record<string, unknown>, timeoutMs: number): Promise<ReplFrame> {
    if (this.closedWith) return Promise.reject(this.closedWith)
    const id = randomUUID()
    return new Promise<ReplFrame>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id)
        reject(new ReplTimeoutError(type))
      }, timeoutMs)
      timer.unref()
      this.pending.set(id, { resolve, reject, timer })
      this.transport.write(encodeFrame(type, { id, ...fields }))
    })
  }

  /** Starts an execution; every frame carrying `id` as exec_id goes to `sink`, the last one being `done`. */
  execute(id: string, code: string, sink: FrameSink, opts: Record<string, unknown> = {}): void {
    this.executions.set(id, sink)
    this.transport.write(encodeFrame('execute', { id, code, ...opts }))
  }

  /** Starts a streamed execution: code arrives with streamChunk, ends with streamEnd. */
  streamBegin(id: string, sink: FrameSink, opts: Record<string, unknown> = {}): void {
    this.executions.set(id, sink)
    this.transport.write(encodeFrame('exec_stream_begin', { id, ...opts }))
  }

  streamChunk(id: string, text: string): void {
    this.transport.write(encodeFrame('exec_stream_chunk', { id, text }))
  }
  streamEnd(id: string): void {
    this.transport.write(encodeFrame('exec_stream_end', { id }))
  }

  /** Asks the REPL to raise KeyboardInterrupt in the running code (fire and forget). */
  interrupt(): void {
    if (!this.closedWith) this.transport.write(encodeFrame('interrupt', { id: randomUUID() }))
  }

  /** Routes frames of an execution already running in the REPL (after re-attaching) to `sink`. */
  track(execId: string, sink: FrameSink): void {
    this.executions.set(execId, sink)
  }

  /** Stops routing frames of an execution (its end was decided by the host). */
  forget(execId: string): void {
    this.executions.delete(execId)
  }

  onLlmRequest(cb: (f: LlmRequestFrame) => void): void {
    this.llmHandler = cb
  }

  sendLlmResponse(replyTo: string, payload: { text?: string; texts?: string[]; error?: string }): void {
    if (!this.closedWith) this.transport.write(encodeFrame('llm_response', { id: randomUUID(), reply_to: replyTo, ...payload }))
  }

  onClose(cb: (err?: Error) => void): void {
    if (this.closedWith) cb(this.closedWith)
    else this.closeCbs.push(cb)
  }

  close(): void {
    this.transport.close()
  }

  private onLine(line: string): void {
    if (!line.trim()) return
    const frame = parseFrame(line)
    if (!frame) {
      this.log.warn({ line: line.slice(0, 200) }, 'repl: invalid frame dropped')
      return
    }
    if (typeof frame.seq === 'number') {
      if (this.lastSeq >= 0 && frame.seq !== this.lastSeq + 1) this.log.warn({ expected: this.lastSeq + 1, got: frame.seq }, 'repl: seq gap')
      this.lastSeq = frame.seq
    }
    this.dispatch(frame)
  }

  private dispatch(frame: ReplFrame): void {
    if (frame.type === 'ready') {
      this.resolveReady(frame)
      return
    }
    if (frame.type === 'reply' && typeof frame.reply_to === 'string') {
      const p = this.pending.get(frame.reply_to)
      if (!p) return
      this.pending.delete(frame.reply_to)
      clearTimeout(p.timer)
      if (frame.ok === false) {
        const e = (frame.error ?? {}) as { code?: string; message?: string }
        p.reject(new ReplRequestError(String(e.code ?? 'repl_error'), String(e.message ?? 'request failed')))
      } else p.resolve(frame)
      return
    }
    if (frame.type === 'llm_request') {
      if (this.llmHandler) this.llmHandler(frame as LlmRequestFrame)
      else this.sendLlmResponse(String(frame.id), { error: 'no LLM is configured for this service' })
      // fall through: the execution's sink sees it too (for llm_call events)
    }
    if (frame.type === 'protocol_error') {
      this.log.warn({ detail: frame.detail }, 'repl: reports a protocol error')
      return
    }
    const execId = typeof frame.exec_id === 'string' ? frame.exec_id : null
    if (!execId) return // output with no execution running (e.g. stray threads): dropped
    const sink = this.executions.get(execId)
    if (!sink) return
    if (frame.type === 'done') this.executions.delete(execId)
    sink(frame)
  }

  private onClosed(err: Error | undefined, rejectReady: (e: Error) => void): void {
    if (this.closedWith) return
    this.closedWith = new ReplClosedError(err ? `the REPL channel closed: ${err.message}` : undefined)
    rejectReady(this.closedWith)
    for (const p of this.pending.values()) {
      clearTimeout(p.timer)
      p.reject(this.closedWith)
    }
    this.pending.clear()
    for (const cb of this.closeCbs) cb(this.closedWith)
  }
}

/** One protocol line → a frame, or null when it is not a valid frame. */
export function parseFrame(line: string): ReplFrame | null {
  try {
    const f = JSON.parse(line) as ReplFrame
    return typeof f === 'object' && f !== null && typeof f.type === 'string' ? f : null
  } catch {
    return null
  }
}
