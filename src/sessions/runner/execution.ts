// One execution as the runner holds it while it is queued or running on this instance, and the
// mapping of REPL frames to the API events they become.
import type { Config } from '../../config.js'
import { keepTextJson } from '../../event-json.js'
import type { DoneStatusT } from '../../schemas.js'
import type { ReplFrame } from '../../repl/protocol.js'
import type { ExecutionRecord } from '../../store/records.js'

export type EventPayload = { type: string; [k: string]: unknown }

/** A frame's field as text: strings as they are, numbers and booleans printed, anything else `fallback`. */
function text(v: unknown, fallback: string): string {
  if (typeof v === 'string') return v
  return typeof v === 'number' || typeof v === 'boolean' ? String(v) : fallback
}

/** A count a frame reports: a non-negative safe integer, else nothing (sandbox code can forge frames). */
export function countOf(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? v : undefined
}

/** A frame's field as a JSON object (a mime bundle, metadata), else empty. */
const bundle = (v: unknown): object => (typeof v === 'object' && v !== null && !Array.isArray(v) ? v : {})

/**
 * Maps a REPL frame to the API event it becomes (null: not shown to clients). Every field is made
 * to fit the Event schema here, whatever the frame says: code in the sandbox can write any frame.
 */
export function frameToEvent(f: ReplFrame, defaultModel: string): EventPayload | null {
  const seq = typeof f.seq === 'number' && Number.isFinite(f.seq) ? { seq: f.seq } : {}
  switch (f.type) {
    case 'stream':
      return keepTextJson(f, { type: f.name === 'stderr' ? 'stderr' : 'stdout', text: text(f.text, ''), ...seq })
    case 'result': {
      const n = countOf(f.execution_count)
      return { type: 'result', ...(n !== undefined ? { execution_count: n } : {}), data: bundle(f.data), ...seq }
    }
    case 'display':
      return { type: 'display', data: bundle(f.data), metadata: bundle(f.metadata), ...seq }
    case 'error':
      return {
        type: 'error',
        ename: text(f.ename, 'Error'),
        evalue: text(f.evalue, ''),
        traceback: Array.isArray(f.traceback) ? f.traceback.map((l) => text(l, '')) : [],
        ...seq,
      }
    case 'limit':
      return { type: 'limit', what: text(f.what, 'output'), dropped_bytes: countOf(f.dropped_bytes) ?? 0, ...seq }
    case 'final':
      return { type: 'final', value: text(f.value, ''), ...seq }
    case 'llm_request':
      return {
        type: 'llm_call',
        prompts: Array.isArray(f.prompts) ? f.prompts.length : 0,
        model: typeof f.model === 'string' && f.model ? f.model : defaultModel,
        ...seq,
      }
    default:
      return null
  }
}

/** Where an execution's events go. */
export interface EventTarget {
  /** The log's execution id: the execution's own, or (an LLM turn's step) the turn's. */
  logId: string
  /** Fields added to every event (a step's number). */
  tag: Record<string, unknown>
  /** Sees each event before it is logged; false leaves it out of the log. */
  observe?: (e: EventPayload) => boolean
}

export interface PendingExecution {
  id: string
  code: string
  timeoutMs: number
  /** 'execute' runs `code`; 'stream' gets its code in pieces through a StreamedRun. */
  kind: 'execute' | 'stream'
  /** bash: `code` is a bash script (a child process of the REPL); absent: Python. */
  language?: 'bash'
  /** A bash execution's exit status, from the REPL's done (null: the sandbox died first). */
  exitCode?: number | null
  target: EventTarget
  /** Set when the host decided the ending (timeout, kill); the REPL's own status is then overridden. */
  forcedStatus: DoneStatusT | null
  startedAt: number
  /** Whether its first status event already said `running` (it did not wait in the queue). */
  announcedRunning: boolean
  ended: boolean
  timers: NodeJS.Timeout[]
  /** What must be in Redis before the execution's end is written: its recorded start, a kept slot (events are sent in order as they come). */
  chain: Promise<unknown>
  /** Frames of this execution the host has handled: its position in the container's log (logged with each event as `pos`). */
  frames: number
  /** Bytes of events logged, and dropped by the host's own caps (a backstop to the REPL's). */
  loggedBytes: { text: number; rich: number }
  droppedBytes: number
  onStart?: () => void
  /** At its end; `recorded`: its end is in Redis (false: Redis never took it, and the session is let go). */
  onDone?: (status: DoneStatusT, recorded: boolean) => void
}

/** The record of an execution as it is queued in `live`; running from the start when it has started (`startedAt`). */
export function queuedRecord(live: { readonly id: string; readonly tenant: string }, ex: PendingExecution): ExecutionRecord {
  return {
    id: ex.id,
    session_id: live.id,
    tenant: live.tenant,
    status: ex.startedAt ? 'running' : 'queued',
    created_at: ex.startedAt || Date.now(),
    started_at: ex.startedAt || null,
    ended_at: null,
    duration_ms: null,
    execution_count: null,
    kind: ex.kind,
    code: ex.code,
    ...(ex.language ? { language: ex.language } : {}),
    timeout_ms: ex.timeoutMs,
  }
}

export function newPendingExecution(
  id: string,
  code: string,
  timeoutMs: number,
  kind: 'execute' | 'stream' = 'execute',
  target?: EventTarget,
): PendingExecution {
  return {
    id,
    code,
    // Whole milliseconds: times computed from it reach Redis, which takes integers (timeout_s 1.7256).
    timeoutMs: Math.ceil(timeoutMs),
    kind,
    target: target ?? { logId: id, tag: {} },
    forcedStatus: null,
    startedAt: 0,
    announcedRunning: false,
    ended: false,
    timers: [],
    chain: Promise.resolve(),
    frames: 0,
    loggedBytes: { text: 0, rich: 0 },
    droppedBytes: 0,
  }
}

/** The session's idle deadline while `ex` runs (from its start): after the longest it may run, its idle timeout. */
export function busyDeadline(live: { readonly idleTimeoutS: number }, ex: PendingExecution, config: Pick<Config, 'INTERRUPT_GRACE_MS'>): number {
  return ex.startedAt + ex.timeoutMs + config.INTERRUPT_GRACE_MS + live.idleTimeoutS * 1000
}

/** Whether the execution writes its own log (status and done included), rather than into another's. */
export const ownsLog = (ex: PendingExecution): boolean => ex.target.logId === ex.id

/** A timer that never keeps the process alive. */
export function unrefTimer(ms: number, fn: () => void): NodeJS.Timeout {
  const t = setTimeout(fn, ms)
  t.unref()
  return t
}
