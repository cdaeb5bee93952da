// One reader of an event log (an execution's, or a background process's output: EventFeed.follow): it sends what this process hands it
// while that follows on from where it is, reads Redis when something may be there that was not
// handed over (it joined late, found a gap, fell behind, or was woken by another instance's append),
// and otherwise waits, until the log's `done` (a process's `exit`) or until it leaves.
import type { Appended } from './event-bytes.js'
import type { LoggedEvent } from './records.js'

/**
 * Events handed to one reader and not yet sent on: past this many bytes, it drops them and reads
 * Redis instead (a slow client). A fast client of bulk output (events of up to 64 KiB) is often a few
 * events behind: at 1 MiB it fell back to Redis about 25 times per 50 MB, and the API spent a third more CPU.
 */
const PENDING_MAX_BYTES = 4 * 1024 * 1024

/** Whether stream id `a` comes after `b` ("ms-seq"; '' before all). */
export function isAfter(a: string, b: string): boolean {
  if (b === '') return a !== ''
  const [am = 0, as = 0] = a.split('-').map(Number)
  const [bm = 0, bs = 0] = b.split('-').map(Number)
  return am > bm || (am === bm && as > bs)
}

/** The entries of `a` after `last`, or null when `a` does not follow on from it (a gap: read Redis). */
function followOn(a: Appended, last: string): LoggedEvent[] | null {
  if (a.prev === last) return a.events
  const i = a.events.findIndex((e) => e.id === last)
  if (i >= 0) return a.events.slice(i + 1)
  const newest = a.events.at(-1)
  return newest && isAfter(newest.id, last) ? null : []
}

/** Where a step of the reader left it: its `done` sent, stopping (it left, or nothing more will come), or going on. */
type Step = 'done' | 'stop' | 'on'

export interface LogReaderOptions {
  /** The id to read after ('' = from the start). */
  afterId: string
  /** The log's first entries, as this process appended them. */
  seed?: Appended
  onEvent: (e: LoggedEvent) => Promise<void> | void
  signal: AbortSignal
  /** One page of the log after `after` from Redis (null: the reader left while Redis could not answer). */
  readPage: (after: string) => Promise<{ events: LoggedEvent[]; more: boolean } | null>
  /** Whether the execution is queued or running (null: the reader left). */
  isLive: () => Promise<boolean | null>
  /** How long a reader waits for news before it reads Redis anyway. */
  quietMs: number
  /** The type of the log's last event (an execution's `done`, a process's `exit`; default `done`). */
  endType?: string
}

export class LogReader {
  private last: string
  private pending: Appended[]
  private pendingBytes: number
  /** Redis may hold events that were not handed over: read it. */
  private dirty: boolean
  /**
   * Nothing came for a while. An empty first read asks whether the execution still runs (an ended one
   * whose log is gone or trimmed has nothing to wait for); after that, only a read after a quiet while does.
   */
  private quiet = true
  /** The record said the execution had ended: one more read gets what it logged before (its done), or nothing will come. */
  private over = false
  /** Ends the wait for news (waitForNews). */
  private wakeUp: (() => void) | null = null

  constructor(private readonly o: LogReaderOptions) {
    this.last = o.afterId
    this.pending = o.seed ? [o.seed] : []
    this.pendingBytes = o.seed?.bytes ?? 0
    this.dirty = !o.seed
  }

  /** Something was appended that the reader must read from Redis. */
  wake(): void {
    this.dirty = true
    this.wakeUp?.()
  }

  /** Entries this process appended, in the order Redis stored them. */
  deliver(a: Appended): void {
    if (this.pendingBytes + a.bytes > PENDING_MAX_BYTES) {
      // A slow reader: Redis has them all, it reads them from there when it catches up.
      this.dropPending()
    } else {
      this.pending.push(a)
      this.pendingBytes += a.bytes
    }
    this.wakeUp?.()
  }

  /** Sends every event after `afterId`, in order and once each; resolves true when `done` was sent. */
  async run(): Promise<boolean> {
    const { signal } = this.o
    const onAbort = () => this.wakeUp?.()
    signal.addEventListener('abort', onAbort)
    try {
      while (!signal.aborted) {
        let step = await this.sendHandedOver()
        if (step === 'on' && !this.dirty) {
          if (this.pending.length === 0) await this.waitForNews()
          continue
        }
        if (step === 'on') step = await this.readRedis()
        if (step !== 'on') return step === 'done'
      }
      return false
    } finally {
      signal.removeEventListener('abort', onAbort)
    }
  }

  /** Sends the entries handed over that follow on from `last`, without reading Redis; at a gap, drops them to read Redis instead. */
  private async sendHandedOver(): Promise<Step> {
    while (this.pending.length > 0 && !this.o.signal.aborted) {
      const a = this.pending.shift()!
      this.pendingBytes -= a.bytes
      const next = followOn(a, this.last)
      if (next === null) {
        this.dropPending()
        break
      }
      const step = await this.send(next)
      if (step !== 'on') return step
    }
    return 'on'
  }

  /** Waits until something is handed over or appended, or a quiet while has passed (then Redis is read anyway). */
  private async waitForNews(): Promise<void> {
    this.quiet = await new Promise<boolean>((resolve) => {
      // Belt and braces against a lost wake-up, and a liveness check (readRedis) when nothing comes.
      const t = setTimeout(() => resolve(true), this.o.quietMs)
      t.unref()
      this.wakeUp = () => {
        // Cleared: a pending timer would keep this reader (its events, its client's reply) alive for its whole wait.
        clearTimeout(t)
        resolve(false)
      }
    })
    this.wakeUp = null
    if (this.quiet) this.dirty = true
  }

  /** Reads a page after `last` from Redis and sends it; when nothing new came, asks whether anything still will. */
  private async readRedis(): Promise<Step> {
    this.dirty = false
    const page = await this.o.readPage(this.last)
    if (!page) return 'stop'
    const step = await this.send(page.events)
    if (step !== 'on') return step
    if (page.more) this.dirty = true
    // Whatever is appended from here on is handed over or wakes this reader.
    if (page.events.length > 0) return 'on'
    // Nothing new for a while: stop if the execution is gone, or ended with no `done` after `last`
    // (the client resumed past it, or the log was trimmed or expired).
    if (this.over) return 'stop'
    if (this.quiet && !(await this.o.isLive())) {
      // It may have ended after the read above: the end's events and record are written together.
      this.over = true
      this.dirty = true
    }
    return 'on'
  }

  /** Sends `events` in order, `last` following each. */
  private async send(events: LoggedEvent[]): Promise<Step> {
    for (const e of events) {
      if (this.o.signal.aborted) return 'stop'
      await this.o.onEvent(e)
      this.last = e.id
      if (e.type === (this.o.endType ?? 'done')) return 'done'
    }
    return 'on'
  }

  private dropPending(): void {
    this.pending = []
    this.pendingBytes = 0
    this.dirty = true
  }
}
