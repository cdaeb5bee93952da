// An execution's events (or a background process's output) as an async iterator that survives dropped
// connections: when the stream ends or breaks before `done` (`exit`), it reconnects to the execution's events endpoint with
// Last-Event-ID set to the last event it yielded, so nothing is lost and nothing repeats.
import { ConnectionError, ReplcastError, ServerError } from './errors.ts'
import type { components } from './schema.ts'
import { readSse } from './sse.ts'

export type ExecutionEvent = components['schemas']['Event']
export type DoneStatus = components['schemas']['DoneStatus']

export interface FollowOptions {
  /** Start after this event id ('' or absent: from the first event). */
  lastEventId?: string
  /** Reconnections in a row without receiving an event before giving up (default 8). */
  maxRetries?: number
  /** First wait before reconnecting, doubled each failure up to 5 s (default 200 ms). */
  retryDelayMs?: number
  /** Stops following (the iterator then throws the signal's reason). */
  signal?: AbortSignal
  /** Told before each reconnection. */
  onReconnect?: (info: { attempt: number; lastEventId: string; error: unknown }) => void
}

/** Opens the events endpoint after `lastEventId`: a response streaming SSE, or null when there is nothing more (204). */
export type OpenEvents = (lastEventId: string, signal?: AbortSignal) => Promise<Response | null>

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const t = setTimeout(done, ms)
    function done() {
      signal?.removeEventListener('abort', abort)
      resolve()
    }
    function abort() {
      clearTimeout(t)
      reject(signal?.reason as Error)
    }
    signal?.addEventListener('abort', abort, { once: true })
  })

/** Whether a failure is worth reconnecting for: the connection's, or a server or proxy briefly unable to answer (502, 503, 504). */
const isTransient = (err: unknown) => !(err instanceof ReplcastError) || err instanceof ConnectionError || (err instanceof ServerError && err.status >= 502)

export class EventStream implements AsyncIterable<ExecutionEvent> {
  /** The id of the last event yielded: pass it as `lastEventId` to carry on elsewhere. */
  lastEventId: string
  /** How many times the stream reconnected. */
  reconnects = 0
  /** The execution's done status, once its `done` event has been yielded. */
  status: DoneStatus | null = null
  private used = false
  /** null: the events cannot be followed again (a one-shot's, whose sandbox goes when its reply ends). */
  private readonly open: OpenEvents | null
  private first: Response | null
  private readonly opts: FollowOptions

  /** `first`: a response already streaming the events (the POST that started the execution), or null to open one. */
  constructor(open: OpenEvents | null, first: Response | null, opts: FollowOptions = {}) {
    this.open = open
    this.first = first
    this.opts = opts
    this.lastEventId = opts.lastEventId ?? ''
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<ExecutionEvent> {
    if (this.used) throw new Error('an EventStream can be iterated once; start another with the same lastEventId')
    this.used = true
    const { signal, maxRetries = 8, retryDelayMs = 200 } = this.opts
    let failures = 0
    let res = this.first ?? (await this.open?.(this.lastEventId, signal)) ?? null
    this.first = null
    for (;;) {
      if (res === null) return // 204: the execution ended and its last event was already delivered
      let error: unknown = new ConnectionError('network', 'the event stream ended before the execution did')
      try {
        for await (const msg of readSse(res.body ?? new ReadableStream())) {
          if (msg.event === 'shutdown') break // the server is going away: resume on another instance
          if (!msg.data) continue
          const e = { ...(JSON.parse(msg.data) as ExecutionEvent), id: msg.id }
          if (msg.id) this.lastEventId = msg.id
          failures = 0
          if (e.type === 'done') this.status = e.status ?? null
          yield e
          // An execution's stream ends with `done`, a background process's output with `exit`.
          if (e.type === 'done' || e.type === 'exit') return
        }
      } catch (err) {
        if (signal?.aborted) throw signal.reason
        error = err
      }
      res = null
      if (!this.open) throw new ConnectionError('network', 'the event stream dropped before the execution ended, and it cannot be resumed', { cause: error })
      while (res === null) {
        failures += 1
        if (failures > maxRetries)
          throw new ConnectionError('network', `the event stream dropped and ${maxRetries} reconnections in a row failed`, { cause: error })
        this.reconnects += 1
        this.opts.onReconnect?.({ attempt: failures, lastEventId: this.lastEventId, error })
        await sleep(Math.min(5000, retryDelayMs * 2 ** (failures - 1)), signal)
        try {
          res = await this.open(this.lastEventId, signal)
          if (res === null) return
        } catch (err) {
          if (signal?.aborted || !isTransient(err)) throw err
          error = err
        }
      }
    }
  }
}
