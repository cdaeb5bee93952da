// Speaks the REPL protocol over any transport: request ids with timeouts, execution frames
// routed by exec_id, a defensive parser (bounded lines, bad frames dropped and logged, rate-limited),
// the sandbox's output handled a fair share at a time (fair-input.ts), a bound on what waits for a
// sandbox that stops reading, and on close every pending request fails with ReplClosedError
// (SandboxMisbehaved when the client itself gave up on a hostile sandbox).
import { randomUUID } from 'node:crypto'
import type { Logger } from 'pino'
import { frameTextJson } from '../event-json.js'
import { FairInput } from './fair-input.js'
import { LimitedLog } from './limited-log.js'
import { LineDecoder } from './line-decoder.js'
import { encodeFrame, isProcessFrame, MAX_FRAME_BYTES, PROTOCOL_VERSION, type LlmRequestFrame, type ProcessFrame, type ReplFrame } from './protocol.js'
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
/** The client ended the channel because the sandbox misbehaved (stopped reading, kept breaking the protocol). */
export class SandboxMisbehaved extends ReplClosedError {
  constructor(readonly reason: string) {
    super(`the REPL channel was closed: ${reason}`)
    this.name = 'SandboxMisbehaved'
  }
}
/** The window in which SANDBOX_PROTOCOL_VIOLATIONS are counted. */
const VIOLATION_WINDOW_MS = 10_000

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

export interface ReplClientOptions {
  readyTimeoutMs: number
  expectReady?: boolean
  /** Bytes that may wait for the sandbox to read them (SANDBOX_INPUT_BUFFER_BYTES); past it the channel is ended. */
  inputBufferBytes?: number
  /** Protocol violations allowed within VIOLATION_WINDOW_MS (SANDBOX_PROTOCOL_VIOLATIONS); past it the channel is ended. */
  maxViolations?: number
  /** Bytes of the sandbox's output handled per second while other sandboxes' output is handled too (SANDBOX_OUTPUT_BYTES_PER_S); absent: no bound. */
  outputBytesPerS?: number
}

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
  private processHandler: ((f: ProcessFrame) => void) | null = null
  /** Owners holding the sandbox's frames back (holdFrames): held while any does. */
  private holds = 0
  private lastSeq = -1
  private closedWith: Error | null = null
  private resolveReady!: (f: ReplFrame) => void
  private rejectReady!: (e: Error) => void
  /** What the sandbox causes to be logged, rate-limited. */
  private readonly sandboxLog: LimitedLog
  private readonly inputBufferBytes: number
  private readonly maxViolations: number
  private violations = 0
  private violationsSince = 0
  /** The sandbox's output, handled a share per turn of the event loop. */
  private readonly input: FairInput

  constructor(
    private readonly transport: ReplTransport,
    private readonly log: Logger,
    opts: ReplClientOptions,
  ) {
    this.ready = new Promise<ReplFrame>((resolve, reject) => {
      this.resolveReady = resolve
      this.rejectReady = reject
    })
    this.ready.catch(() => undefined)
    this.sandboxLog = new LimitedLog(log)
    this.inputBufferBytes = opts.inputBufferBytes ?? Infinity
    this.maxViolations = opts.maxViolations ?? Infinity
    const decoder = new LineDecoder(
      MAX_FRAME_BYTES,
      (line) => this.onLine(line),
      (bytes) => this.violation({ bytes }, 'repl: oversized frame dropped'),
    )
    this.input = new FairInput(transport, decoder, opts.outputBytesPerS)
    transport.onData((chunk) => this.input.push(chunk))
    transport.onClose((err) => {
      this.input.flush()
      this.onClosed(err)
    })
    if (opts.expectReady === false) {
      this.resolveReady({ v: PROTOCOL_VERSION, type: 'ready' })
    } else {
      const t = setTimeout(() => this.rejectReady(new ReplTimeoutError('ready')), opts.readyTimeoutMs)
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
      this.send(encodeFrame(type, { id, ...fields }))
    })
  }

  /** Starts an execution; every frame carrying `id` as exec_id goes to `sink`, the last one being `done`. */
  execute(id: string, code: string, sink: FrameSink, opts: Record<string, unknown> = {}): void {
    this.executions.set(id, sink)
    this.send(encodeFrame('execute', { id, code, ...opts }))
  }

  /** Starts a streamed execution: code arrives with streamChunk, ends with streamEnd. */
  streamBegin(id: string, sink: FrameSink, opts: Record<string, unknown> = {}): void {
    this.executions.set(id, sink)
    this.send(encodeFrame('exec_stream_begin', { id, ...opts }))
  }

  streamChunk(id: string, text: string): void {
    this.send(encodeFrame('exec_stream_chunk', { id, text }))
  }
  streamEnd(id: string): void {
    this.send(encodeFrame('exec_stream_end', { id }))
  }

  /** Asks the REPL to raise KeyboardInterrupt in the running code (fire and forget). */
  interrupt(): void {
    this.send(encodeFrame('interrupt', { id: randomUUID() }))
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

  /** Background processes' frames (output, limit, exit) go to `cb`; without it they are dropped. */
  onProcessFrame(cb: (f: ProcessFrame) => void): void {
    this.processHandler = cb
  }

  sendLlmResponse(replyTo: string, payload: { text?: string; texts?: string[]; error?: string }): void {
    this.send(encodeFrame('llm_response', { id: randomUUID(), reply_to: replyTo, ...payload }))
  }

  onClose(cb: (err?: Error) => void): void {
    if (this.closedWith) cb(this.closedWith)
    else this.closeCbs.push(cb)
  }

  close(): void {
    this.transport.close()
  }

  /**
   * Holds the sandbox's frames back (`true`: where the transport can; they wait in the sandbox) or lets
   * them come again. Each owner (executions' output, processes' output) pairs its calls: the frames
   * come again once none holds them.
   */
  holdFrames(hold: boolean): void {
    this.holds = Math.max(0, this.holds + (hold ? 1 : -1))
    this.input.hold(this.holds > 0)
  }

  /**
   * Writes one frame, unless what already waits for the sandbox (a sandbox that stopped reading
   * its input) would pass the bound: then the channel is ended instead. A frame into an empty
   * buffer always goes, however long.
   */
  private send(line: string): void {
    if (this.closedWith) return
    const waiting = this.transport.bufferedBytes?.() ?? 0
    if (waiting > 0 && waiting + Buffer.byteLength(line) > this.inputBufferBytes) {
      this.misbehaved(`the sandbox stopped reading its input (${waiting} bytes were waiting for it; the limit is ${this.inputBufferBytes})`)
      return
    }
    this.transport.write(line)
  }

  /** A frame the sandbox got wrong: logged (rate-limited) and counted; too many within the window end the channel. */
  private violation(obj: object, msg: string): void {
    this.sandboxLog.warn(obj, msg)
    const now = Date.now()
    if (now - this.violationsSince > VIOLATION_WINDOW_MS) {
      this.violationsSince = now
      this.violations = 0
    }
    if (++this.violations > this.maxViolations)
      this.misbehaved(`the sandbox broke the REPL protocol more than ${this.maxViolations} times within ${VIOLATION_WINDOW_MS / 1000} s`)
  }

  /** Gives up on the sandbox: every waiter learns why (SandboxMisbehaved), and the channel closes. */
  private misbehaved(reason: string): void {
    if (this.closedWith) return
    this.onClosed(new SandboxMisbehaved(reason))
    this.transport.close()
  }

  private onLine(line: string): void {
    if (this.closedWith || !line.trim()) return
    const frame = parseFrame(line)
    if (!frame) {
      this.violation({ line: line.slice(0, 200) }, 'repl: invalid frame dropped')
      return
    }
    if (typeof frame.seq === 'number') {
      if (this.lastSeq >= 0 && frame.seq !== this.lastSeq + 1) this.violation({ expected: this.lastSeq + 1, got: frame.seq }, 'repl: seq gap')
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
      this.violation({ detail: typeof frame.detail === 'string' ? frame.detail.slice(0, 200) : null }, 'repl: reports a protocol error')
      return
    }
    if (isProcessFrame(frame)) {
      this.processHandler?.(frame)
      return
    }
    const execId = executionOf(frame)
    if (!execId) return // output with no execution running (e.g. stray threads): dropped
    const sink = this.executions.get(execId)
    if (!sink) return
    if (frame.type === 'done') this.executions.delete(execId)
    sink(frame)
  }

  private onClosed(err: Error | undefined): void {
    if (this.closedWith) return
    this.closedWith = err instanceof SandboxMisbehaved ? err : new ReplClosedError(err ? `the REPL channel closed: ${err.message}` : undefined)
    this.sandboxLog.flush()
    this.rejectReady(this.closedWith)
    for (const p of this.pending.values()) {
      clearTimeout(p.timer)
      p.reject(this.closedWith)
    }
    this.pending.clear()
    for (const cb of this.closeCbs) cb(this.closedWith)
  }
}

/** The execution a frame is routed to (every frame naming one but ready, reply and protocol_error), or null. */
export function executionOf(frame: ReplFrame): string | null {
  if (frame.type === 'ready' || frame.type === 'reply' || frame.type === 'protocol_error') return null
  return typeof frame.exec_id === 'string' ? frame.exec_id : null
}

/** One protocol line → a frame, or null when it is not a valid frame. */
export function parseFrame(line: string): ReplFrame | null {
  try {
    const f = JSON.parse(line) as ReplFrame
    if (typeof f !== 'object' || f === null || typeof f.type !== 'string') return null
    if (f.type === 'stream' || f.type === 'proc_output') frameTextJson(line, f)
    return f
  } catch {
    return null
  }
}
