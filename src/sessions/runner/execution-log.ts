// What the execution runner writes to Redis for one execution: its events, in order, within the
// host's own byte budget, and its end (the `done` event with the execution and session fields),
// retried while Redis is away, each under the session's lease term (a write Redis refuses because
// the lease passed to another instance lets the session go). The runner decides what happens; this
// file only records it.
import type { Logger } from 'pino'
import type { Config } from '../../config.js'
import type { DoneStatusT } from '../../schemas.js'
import type { EventFeed } from '../../store/event-feed.js'
import { appendedAhead, type Appended } from '../../store/event-bytes.js'
import type { EventLogStore } from '../../store/event-log-store.js'
import type { ExecutionStore } from '../../store/execution-store.js'
import { LeaseLost } from '../../store/lease-store.js'
import { ownsLog, type EventPayload, type PendingExecution } from './execution.js'
import type { LiveSession } from './live-session.js'
import { LogTails } from './log-tails.js'
import { UnstoredOutput } from './unstored-output.js'
import type { Metrics } from '../../metrics.js'
import { eventJson, withTextJson } from '../../event-json.js'
import { isRedisUnavailable, retry } from '../../retry.js'

/** Per-event overhead counted against an execution's byte budget (so floods of tiny frames count). */
const FRAME_OVERHEAD_BYTES = 64
/** Rich events (results, displays, errors) an execution may log at the image size cap. */
const IMAGES_PER_EXECUTION = 4
const BASE64_GROWTH = 1.4

export interface ExecutionLogDeps {
  config: Config
  stores: { executions: Pick<ExecutionStore, 'recordEnd'>; logs: Pick<EventLogStore, 'appendLive' | 'appendLiveMany'> }
  feed: Pick<EventFeed, 'deliver'>
  log: Logger
  metrics: Metrics
  /** A write failed: refused, the session's lease having passed to another instance ('lost'), or not made at all ('unrecorded'). */
  letGo?: (live: LiveSession, why: 'lost' | 'unrecorded') => void
}

/** Events of an execution not sent to Redis yet: they leave together at the end of the current task. */
export interface Outbox {
  events: EventPayload[]
  bytes: number
}

export class ExecutionLog {
  /** Output each session has sent Redis that it has not stored yet: past its share its frames are held back. */
  private readonly unstored = new UnstoredOutput<LiveSession>((live, on) => live.client.holdFrames(on))
  private readonly outboxes = new WeakMap<PendingExecution, Outbox>()
  private readonly tails = new LogTails()

  constructor(private readonly deps: ExecutionLogDeps) {}

  /** The log of `ex` was started with `added` (its first `status`, stored with the execution's record): handed to local readers. */
  started(live: LiveSession, ex: PendingExecution, added: Appended | null): void {
    this.tails.started(ex, added)
    this.deps.feed.deliver(live.id, ex.id, added)
  }

  /** A write of `count` events to the log of `ex` sent elsewhere (its recorded start): what it added is handed to local readers. */
  async written(live: LiveSession, ex: PendingExecution, count: number, write: Promise<Appended | null>): Promise<void> {
    const replied = this.tails.sending(ex, count)
    try {
      const added = await write
      replied(added)
      this.deps.feed.deliver(live.id, ex.id, added)
    } catch (err) {
      replied(null)
      throw err
    }
  }

  /**
   * Appends an event of `ex` after the ones before it, where its target says. An execution's own log
   * gets the events that arrive together (the frames of one read from the sandbox) in one round trip,
   * sent once the current task and its microtasks are done, or with its end when that came with them
   * (claim). One Redis connection keeps the order in which the execution's writes are sent (its start,
   * its events, its end), so none waits for the reply to the one before it.
   */
  append(live: LiveSession, ex: PendingExecution, event: EventPayload, bytes = 0): void {
    const { logId, tag, observe } = ex.target
    if (observe && !observe(event)) return
    if (bytes) this.unstored.sent(live, bytes)
    if (!ownsLog(ex)) {
      // A log another writes too (an agent's turn): its events go at once, in the order written.
      this.store(live, ex, logId, [{ ...event, ...tag }], bytes, (events) => this.deps.stores.logs.appendLive(live.id, logId, events[0]!, live.tenant))
      return
    }
    let box = this.outboxes.get(ex)
    if (!box) {
      const opened: Outbox = (box = { events: [], bytes: 0 })
      this.outboxes.set(ex, opened)
      queueMicrotask(() => {
        if (this.outboxes.get(ex) !== opened) return // claimed by the end
        this.outboxes.delete(ex)
        this.store(live, ex, logId, opened.events, opened.bytes, (events, ahead) =>
          this.deps.stores.logs.appendLiveMany(live.id, logId, events, live.tenant, ahead ? 'kept' : 'plain', live.term),
        )
      })
    }
    box.events.push({ ...event, ...tag })
    box.bytes += bytes
  }

  /** Takes the events of `ex` not sent yet, to go with its end (call before anything awaits: they would leave on their own). */
  claim(ex: PendingExecution): Outbox | undefined {
    const box = this.outboxes.get(ex)
    this.outboxes.delete(ex)
    return box
  }

  private store(
    live: LiveSession,
    ex: PendingExecution,
    logId: string,
    events: EventPayload[],
    bytes: number,
    write: (events: EventPayload[], ahead: boolean) => Promise<Appended | null>,
  ): void {
    // Let go (see the write's failure below): the session's next adopter appends what was not stored,
    // from the container's log, under the ids it would have had here.
    if (live.state === 'released' && ownsLog(ex)) {
      if (bytes) this.unstored.stored(live, bytes)
      return
    }
    // Handed to local readers when sent, not when stored, when this instance knows where the log ends
    // (only ever its own log) and they are small: the write then keeps them whatever the tenant's
    // budget (see appendedAhead).
    const last = this.tails.settled(ex)
    let ahead = last !== null ? appendedAhead(last, events) : null
    if (ahead && !this.tails.spend(ex, ahead)) ahead = null
    const replied = this.tails.sending(ex, events.length)
    // Past the tenant's max_event_bytes they are refused; the log may have got a limit event instead.
    write(events, ahead !== null).then(
      (added) => {
        replied(added)
        if (bytes) this.unstored.stored(live, bytes)
        this.deps.feed.deliver(live.id, logId, added)
      },
      (err: unknown) => {
        replied(null)
        if (bytes) this.unstored.stored(live, bytes)
        if (err instanceof LeaseLost) return this.deps.letGo?.(live, 'lost')
        this.deps.log.error({ err, sessionId: live.id, executionId: ex.id }, 'event append failed')
        // Writes after it would take the ids of what it may have handed to readers ahead: the session is
        // let go instead, and adopted again from what Redis holds.
        if (ownsLog(ex) && live.state === 'attached') this.deps.letGo?.(live, 'unrecorded')
      },
    )
    // After the write: it leaves before anything a reader does with them.
    if (ahead) this.deps.feed.deliver(live.id, logId, ahead)
  }

  /**
   * Appends an output event within the execution's byte budget; past it the bytes are only counted
   * (a `limit` event reports them at the end). The REPL caps output, but its channel lives in the
   * same process as the user's code: the host counts too, so no sandbox can fill Redis. The budget
   * leaves the REPL's own caps room to act first.
   */
  output(live: LiveSession, ex: PendingExecution, event: EventPayload): void {
    const logged = withTextJson({ ...event, pos: ex.frames })
    const size = eventJson(logged).length + FRAME_OVERHEAD_BYTES
    const text = event.type === 'stdout' || event.type === 'stderr'
    const budget = text ? 2 * live.outputBytes : IMAGES_PER_EXECUTION * this.deps.config.MAX_IMAGE_BYTES * BASE64_GROWTH
    const used = text ? ex.loggedBytes.text : ex.loggedBytes.rich
    if (used + size > budget) {
      ex.droppedBytes += size
      return
    }
    if (text) ex.loggedBytes.text += size
    else ex.loggedBytes.rich += size
    this.append(live, ex, logged, size)
  }

  /**
   * Records the end of `ex` (after its events): the `done` event when it owns its log, the
   * execution's fields (it ended at `end`) and, while the session is `alive`, the session's. While Redis is away the
   * write waits, up to REDIS_RETRY_MS, so a restart of Redis loses nothing; false when it never took.
   * When this instance knows where the log ends and `before` is small, local readers get the end
   * (`before`, then the done) when it is sent, with the ids Redis will give it, not one round trip
   * later (see store(), and "Output before Redis has stored it" in docs/reliability.md).
   */
  async end(
    live: LiveSession,
    ex: PendingExecution,
    status: DoneStatusT,
    executionCount: number | undefined,
    at: { end: number; alive: boolean },
    before?: Outbox,
  ): Promise<boolean> {
    const { end, alive } = at
    const duration = end - (ex.startedAt || end)
    const done = ownsLog(ex)
      ? {
          type: 'done',
          status,
          ...(executionCount !== undefined ? { execution_count: executionCount } : {}),
          duration_ms: duration,
          ...(ex.language === 'bash' ? { exit_code: ex.exitCode ?? null } : {}),
        }
      : null
    const fields = { status, ended_at: end, duration_ms: duration, execution_count: executionCount ?? null, ...(ex.startedAt ? {} : { started_at: null }) }
    const session = alive
      ? {
          fields: {
            status: live.work.queue.length ? ('busy' as const) : ('ready' as const),
            last_active_at: end,
            ...(executionCount !== undefined ? { execution_count: executionCount } : {}),
          },
          deadlineMs: end + live.idleTimeoutS * 1000,
        }
      : null
    const { stores, metrics } = this.deps
    metrics.executions.inc({ status })
    metrics.executionSeconds.observe(duration / 1000)
    const last = this.tails.settled(ex)
    const ahead = done && last !== null ? appendedAhead(last, before?.events ?? [], done) : null
    const expected = ahead ? ahead.events.at(-1)!.id : ''
    try {
      const written = retry(() => stores.executions.recordEnd(live.id, ex.id, live.tenant, done, fields, session, before?.events, expected, live.term), {
        windowMs: this.deps.config.REDIS_RETRY_MS,
        retryable: (err) => isRedisUnavailable(err) && !(err instanceof LeaseLost),
        onRetry: () => metrics.redisWriteRetries.inc(),
      })
      // Sent first: the end's write leaves before anything a reader does with it (the next request).
      if (ahead) this.deps.feed.deliver(live.id, ex.id, ahead)
      const added = await written
      // Again, for a reader that joined since (the others skip what they have).
      if (done || before) this.deps.feed.deliver(live.id, ex.id, added)
      return true
    } catch (err) {
      // Another instance holds the session now: it ends the execution from the sandbox's own log.
      if (err instanceof LeaseLost) this.deps.letGo?.(live, 'lost')
      else this.deps.log.error({ err, sessionId: live.id, executionId: ex.id }, 'could not record the end of an execution; letting the session go')
      return false
    } finally {
      if (before?.bytes) this.unstored.stored(live, before.bytes)
    }
  }
}
