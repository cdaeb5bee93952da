// An in-memory ReplTransport linked to a scriptable fake REPL, for unit tests: no Docker, no pipes.
// Delivery is synchronous in both directions, so a test controls every interleaving itself.
import type { ReplTransport } from '../../src/repl/transport.js'

/** A frame as the fake REPL sees it (the host always sends objects with a `type`). */
export type Frame = { v?: number; type: string; id?: string; [k: string]: unknown }

/** The host side: what ReplClient is given. */
export class MemoryTransport implements ReplTransport {
  /** Set by memoryTransportPair: the other end. */
  peer!: FakeRepl
  closed = false
  closeError: Error | undefined
  /** Held back by pause(): the REPL's bytes wait (here) until resume(). */
  paused = false
  private dataCb: ((chunk: Buffer) => void) | null = null
  private early: Buffer[] = []
  private readonly closeCbs: Array<(err?: Error) => void> = []

  write(data: string): void {
    if (!this.closed) this.peer.receive(data)
  }

  onData(cb: (chunk: Buffer) => void): void {
    this.dataCb = cb
    const early = this.early
    this.early = []
    for (const b of early) cb(b)
  }

  onClose(cb: (err?: Error) => void): void {
    this.closeCbs.push(cb)
  }

  close(): void {
    this.shut()
  }

  pause(): void {
    this.paused = true
  }

  resume(): void {
    this.paused = false
    while (!this.paused && this.dataCb && this.early.length) this.dataCb(this.early.shift()!)
  }

  /** Bytes from the fake REPL (kept until a receiver is registered, and while paused). */
  deliver(chunk: Buffer): void {
    if (this.closed) return
    if (this.dataCb && !this.paused) this.dataCb(chunk)
    else this.early.push(chunk)
  }

  /** Closes this end and the other one; `err` reaches both sides' close callbacks. */
  shut(err?: Error): void {
    if (this.closed) return
    this.closed = true
    this.closeError = err
    for (const cb of this.closeCbs) cb(err)
    this.peer.shut(err)
  }
}

/** The REPL side: records what the host wrote and sends frames or raw bytes back. */
export class FakeRepl {
  /** Set by memoryTransportPair: the other end. */
  host!: MemoryTransport
  /** Every complete line the host wrote, in order. */
  readonly lines: string[] = []
  /** Every line the host wrote, parsed (lines that are not JSON objects are kept in `lines` only). */
  readonly frames: Frame[] = []
  closed = false
  closeError: Error | undefined
  private partial = ''
  private seq = 0
  private taken = 0
  private waiters: Array<() => void> = []
  private readonly handlers: Array<(f: Frame) => void> = []

  /** Scripts the REPL: `cb` sees every frame the host writes, as it is written. */
  onFrame(cb: (f: Frame) => void): void {
    this.handlers.push(cb)
  }

  /** The next frame the host wrote that no earlier call took (of `type`, when given, skipping others). */
  async nextFrame(type?: string): Promise<Frame> {
    for (;;) {
      while (this.taken < this.frames.length) {
        const f = this.frames[this.taken++]!
        if (type === undefined || f.type === type) return f
      }
      if (this.closed) throw new Error('the fake REPL is closed')
      await new Promise<void>((resolve) => this.waiters.push(resolve))
    }
  }

  /** Sends one frame as an NDJSON line; `v` and the next `seq` are added unless given. */
  send(frame: Frame): void {
    this.sendRaw(JSON.stringify({ v: 1, seq: this.seq++, ...frame }) + '\n')
  }

  /** Sends the REPL's ready frame. */
  ready(fields: Record<string, unknown> = {}): void {
    this.send({ type: 'ready', exec_id: null, ...fields })
  }

  /** Answers request `id` (ok unless the fields say otherwise). */
  reply(id: string, fields: Record<string, unknown> = {}): void {
    this.send({ type: 'reply', reply_to: id, exec_id: null, ok: true, ...fields })
  }

  /** Sends bytes exactly as given (several lines, half a line, invalid UTF-8...). */
  sendRaw(data: string | Buffer): void {
    this.host.deliver(typeof data === 'string' ? Buffer.from(data) : data)
  }

  /** The REPL side goes away, optionally with an error (as a broken attach stream would). */
  close(err?: Error): void {
    this.host.shut(err)
  }

  /** Bytes written by the host. */
  receive(data: string): void {
    const parts = (this.partial + data).split('\n')
    this.partial = parts.pop()!
    for (const line of parts) {
      this.lines.push(line)
      let parsed: unknown
      try {
        parsed = JSON.parse(line)
      } catch {
        parsed = null
      }
      if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) {
        const f = parsed as Frame
        this.frames.push(f)
        for (const h of this.handlers) h(f)
      }
    }
    this.wake()
  }

  shut(err?: Error): void {
    if (this.closed) return
    this.closed = true
    this.closeError = err
    this.host.shut(err)
    this.wake()
  }

  private wake(): void {
    const w = this.waiters
    this.waiters = []
    for (const resolve of w) resolve()
  }
}

/** A linked pair: give `transport` to the code under test, drive `repl` from the test. */
export function memoryTransportPair(): { transport: MemoryTransport; repl: FakeRepl } {
  const transport = new MemoryTransport()
  const repl = new FakeRepl()
  transport.peer = repl
  repl.host = transport
  return { transport, repl }
}
