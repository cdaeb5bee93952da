// A sandbox's output is handled a share at a time, so that a sandbox flooding its channel slows
// itself, not the sessions beside it. In one turn of the event loop the API handles at most the
// sandbox's share of TURN_BYTES (split between the sandboxes whose output it handled in the turn
// before); and, while other sandboxes' output is handled too, at most `bytesPerS` of it a second.
// Past either, its transport is held (the sandbox's writes block) until the next turn, or the next
// tenth of a second. Its owner may hold it too (Redis is behind: sessions/unstored-output.ts).
// Turns and windows are the event loop's, so every sandbox in the process shares them.
import type { LineDecoder } from './line-decoder.js'
import type { ReplTransport } from './transport.js'

/** Bytes of sandbox output (lines at LINE_COST_BYTES more) handled per turn of the event loop, shared between the sandboxes that have some. */
export const TURN_BYTES = 64 * 1024
/** The least share of a turn a sandbox gets, however many share it. */
const MIN_TURN_SHARE_BYTES = 4 * 1024
/** A sandbox's rate is counted per window of this many ms (a tenth of its rate per window). */
const RATE_WINDOW_MS = 100

/** What the sandboxes' inputs share: the turn in progress and the window of time in progress. */
class Shared {
  /** The number of the turn in progress: it changes once the turn's I/O is handled. */
  turn = 0
  /** Inputs that handled output in this turn, and in the turn before. */
  private inTurn = 0
  private inLastTurn = 1
  private turnEnds = false
  /** Inputs that handled output in this window, and in the window before. */
  private window = 0
  private inWindow = new Set<FairInput>()
  private inLastWindow = new Set<FairInput>()

  turnShare(): number {
    return Math.max(MIN_TURN_SHARE_BYTES, TURN_BYTES / Math.max(1, this.inLastTurn))
  }

  /** An input handles output for the first time in this turn. */
  joinedTurn(): void {
    this.inTurn++
    if (this.turnEnds) return
    this.turnEnds = true
    // Scheduled before any input's own wait for the next turn, so it runs first.
    setImmediate(() => {
      this.turnEnds = false
      this.turn++
      this.inLastTurn = this.inTurn
      this.inTurn = 0
    })
  }

  /** The number of the window in progress. */
  windowNow(): number {
    const w = Math.floor(performance.now() / RATE_WINDOW_MS)
    if (w !== this.window) {
      this.inLastWindow = w === this.window + 1 ? this.inWindow : new Set()
      this.inWindow = new Set()
      this.window = w
    }
    return w
  }

  /** `input` handles output in this window. */
  joinedWindow(input: FairInput): void {
    this.inWindow.add(input)
  }

  /** Whether other sandboxes' output is handled too (in this window or the one before). */
  contended(input: FairInput): boolean {
    for (const other of this.inWindow) if (other !== input) return true
    for (const other of this.inLastWindow) if (other !== input) return true
    return false
  }
}
const shared = new Shared()

export class FairInput {
  /** Bytes received beyond the share: handled first, in the next turn or window. */
  private waiting: Buffer[] = []
  private turn = -1
  private spentInTurn = 0
  private window = -1
  private spentInWindow = 0
  /** Waiting for the next turn, or for the next window. */
  private nextTurn = false
  private throttled = false
  /** In take(): bytes handed over meanwhile (a transport that resumes at once) join the same loop. */
  private taking = false
  private held = false
  private paused = false
  private readonly perWindow: number

  constructor(
    private readonly transport: Pick<ReplTransport, 'pause' | 'resume'>,
    private readonly decoder: LineDecoder,
    bytesPerS = Infinity,
  ) {
    this.perWindow = (bytesPerS * RATE_WINDOW_MS) / 1000
  }

  /** Bytes from the transport: handled now as far as the share allows, the rest later. */
  push(chunk: Buffer): void {
    this.waiting.push(chunk)
    this.handle()
  }

  /** The owner's hold (`true`: no more bytes from the transport until released); what waits here is still handled. */
  hold(on: boolean): void {
    this.held = on
    this.sync()
  }

  /** Handles what waits, whatever the share (the channel closed: what came before it must be seen first). */
  flush(): void {
    for (const b of this.waiting.splice(0)) this.decoder.push(b)
  }

  private handle(): void {
    // A transport that cannot be held gets no share: holding its bytes here would only grow memory.
    if (!this.transport.pause) return this.flush()
    if (this.nextTurn || this.throttled || this.taking) return
    this.taking = true
    try {
      this.take()
    } finally {
      this.taking = false
    }
    if (this.waiting.length && !this.throttled) {
      this.nextTurn = true
      setImmediate(() => {
        this.nextTurn = false
        this.handle()
      })
    }
    this.sync()
  }

  /** Hands what waits to the decoder, as far as this turn's share and this window's rate allow. */
  private take(): void {
    if (this.turn !== shared.turn) {
      this.turn = shared.turn
      this.spentInTurn = 0
    }
    const turnShare = shared.turnShare()
    while (this.waiting.length && this.spentInTurn < turnShare) {
      const window = shared.windowNow()
      if (window !== this.window) {
        this.window = window
        this.spentInWindow = 0
      }
      let budget = turnShare - this.spentInTurn
      if (this.perWindow < Infinity && shared.contended(this)) {
        if (this.spentInWindow >= this.perWindow) {
          this.throttle((window + 1) * RATE_WINDOW_MS - performance.now())
          return
        }
        budget = Math.min(budget, this.perWindow - this.spentInWindow)
      }
      if (this.spentInWindow === 0) shared.joinedWindow(this)
      if (this.spentInTurn === 0) shared.joinedTurn()
      const b = this.waiting[0]!
      const { taken, cost } = this.decoder.push(b, budget)
      this.spentInTurn += cost
      this.spentInWindow += cost
      if (taken < b.length) this.waiting[0] = b.subarray(taken)
      else this.waiting.shift()
    }
  }

  /** Handles nothing more for `ms` (the sandbox had its rate's worth in this window). */
  private throttle(ms: number): void {
    this.throttled = true
    setTimeout(() => {
      this.throttled = false
      this.handle()
    }, ms).unref()
  }

  /** The transport is held while the owner holds it or bytes wait here. */
  private sync(): void {
    const pause = this.held || this.waiting.length > 0
    if (pause === this.paused) return
    this.paused = pause
    if (pause) this.transport.pause?.()
    else this.transport.resume?.()
  }
}
