// What the holder writes to Redis for its background processes: each one's output events in order
// (those that arrive together in one round trip), within the host's own byte budget per process,
// each write under the session's lease term, and its end (the `exit` event and the record's end,
// retried while Redis is away). Output sent to Redis and not stored yet is bounded across the
// instance's sessions, as executions' output is: past a session's share its sandbox's frames wait.
import type { Logger } from 'pino'
import type { Config } from '../../config.js'
import { eventJson, withTextJson } from '../../event-json.js'
import { isRedisUnavailable, retry } from '../../retry.js'
import type { EventFeed } from '../../store/event-feed.js'
import type { EventLogStore } from '../../store/event-log-store.js'
import { LeaseLost } from '../../store/lease-store.js'
import type { ProcessStore } from '../../store/process-store.js'
import type { ProcessFrame } from '../../repl/protocol.js'
import { UnstoredOutput, type EventPayload, type LiveSession } from '../runner/index.js'

/** Counted against a process's byte budget per event (so floods of tiny frames count). */
const EVENT_OVERHEAD_BYTES = 64

/** One background process as its holder drives it. */
export interface LiveProcess {
  readonly id: string
  readonly live: LiveSession
  /** The last frame handled (its `pos`): frames at or before it are repeats. */
  pos: number
  /** Frames that came while its missed output was being replayed (after an adoption); null: none is. */
  early: ProcessFrame[] | null
  loggedBytes: number
  /** Output past the host's budget, reported in a `limit` event at the end. */
  droppedBytes: number
  /** Its exit is being (or was) recorded: nothing more is appended. */
  ended: boolean
  /** Its end's write, once started. */
  ending: Promise<boolean> | null
}

export interface ProcessLogDeps {
  config: Config
  stores: { logs: Pick<EventLogStore, 'appendLiveMany'>; processes: Pick<ProcessStore, 'end'> }
  feed: Pick<EventFeed, 'deliver'>
  log: Logger
  /** Redis refused a write: the session's lease passed to another instance, which drives its processes now. */
  letGo?: (live: LiveSession, why: 'lost') => void
}

interface Outbox {
  events: EventPayload[]
  bytes: number
}

export class ProcessLog {
  private readonly unstored = new UnstoredOutput<LiveSession>((live, on) => live.client.holdFrames(on))
  private readonly outboxes = new WeakMap<LiveProcess, Outbox>()

  constructor(private readonly deps: ProcessLogDeps) {}

  /**
   * Appends an output event within the process's byte budget (twice the REPL's own cap, which acts
   * first: the REPL lives in the sandbox, so the host counts too); past it the bytes are only counted.
   */
  output(proc: LiveProcess, event: EventPayload): void {
    if (proc.ended) return
    const logged = withTextJson(event)
    const size = eventJson(logged).length + EVENT_OVERHEAD_BYTES
    if (proc.loggedBytes + size > 2 * this.deps.config.PROCESS_OUTPUT_BYTES) {
      proc.droppedBytes += size
      return
    }
    proc.loggedBytes += size
    this.append(proc, logged, size)
  }

  /** Appends an event after the ones before it: those of one turn of the event loop leave in one round trip. */
  append(proc: LiveProcess, event: EventPayload, bytes = 0): void {
    if (proc.ended) return
    const { live } = proc
    if (bytes) this.unstored.sent(live, bytes)
    let box = this.outboxes.get(proc)
    if (!box) {
      const opened: Outbox = (box = { events: [], bytes: 0 })
      this.outboxes.set(proc, opened)
      queueMicrotask(() => {
        if (this.outboxes.get(proc) !== opened) return // claimed by the end
        this.outboxes.delete(proc)
        this.store(proc, opened)
      })
    }
    box.events.push(event)
    box.bytes += bytes
  }

  private store(proc: LiveProcess, box: Outbox): void {
    const { live } = proc
    this.deps.stores.logs.appendLiveMany(live.id, proc.id, box.events, live.tenant, 'plain', live.term).then(
      (added) => {
        this.stored(live, box)
        this.deps.feed.deliver(live.id, proc.id, added)
      },
      (err: unknown) => {
        this.stored(live, box)
        if (err instanceof LeaseLost) this.deps.letGo?.(live, 'lost')
        else this.deps.log.error({ err, sessionId: live.id, processId: proc.id }, 'process output append failed')
      },
    )
  }

  private stored(live: LiveSession, box: Outbox | undefined): void {
    if (box?.bytes) this.unstored.stored(live, box.bytes)
  }

  /**
   * Records the end of `proc` (after its events): the `exit` event with `exitCode` (null: it ended with
   * its sandbox) and the REPL's count of output it dropped, its record's end. Retried while Redis is
   * away, up to REDIS_RETRY_MS; false when it never took (or another instance holds the session now).
   */
  end(proc: LiveProcess, exitCode: number | null, replDropped = 0): Promise<boolean> {
    if (proc.ending) return proc.ending
    proc.ended = true
    const { live } = proc
    const box = this.outboxes.get(proc)
    this.outboxes.delete(proc)
    const before = [...(box?.events ?? [])]
    if (proc.droppedBytes) before.push({ type: 'limit', what: 'event_bytes', dropped_bytes: proc.droppedBytes })
    const exit = { type: 'exit', exit_code: exitCode, ...(replDropped ? { dropped_bytes: replDropped } : {}) }
    const ended = Date.now()
    proc.ending = (async () => {
      try {
        const added = await retry(
          () =>
            this.deps.stores.processes.end(
              { tenant: live.tenant, sid: live.id, pid: proc.id },
              exit,
              { exit_code: exitCode, ended_at: ended },
              before,
              live.term,
            ),
          { windowMs: this.deps.config.REDIS_RETRY_MS, retryable: (err) => isRedisUnavailable(err) && !(err instanceof LeaseLost) },
        )
        this.deps.feed.deliver(live.id, proc.id, added)
        return true
      } catch (err) {
        if (err instanceof LeaseLost) this.deps.letGo?.(live, 'lost')
        else this.deps.log.error({ err, sessionId: live.id, processId: proc.id }, 'could not record the end of a process')
        return false
      } finally {
        this.stored(live, box)
      }
    })()
    return proc.ending
  }
}
