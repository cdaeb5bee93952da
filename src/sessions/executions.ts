// The way in to a session's executions, for the HTTP routes and the agent: submit code, run code
// that arrives in pieces (StreamedRun), open a log that the caller drives (an LLM turn), interrupt,
// and read or follow an execution's events from Redis (from any instance).
import type { Config } from '../config.js'
import { AppError } from '../errors.js'
import type { DoneStatusT, ExecutionT } from '../schemas.js'
import type { EventFeed } from '../store/event-feed.js'
import { isAfter } from '../store/log-reader.js'
import type { Appended } from '../store/event-bytes.js'
import type { ExecutionRecord, LoggedEvent } from '../store/records.js'
import type { Stores } from '../store/stores.js'
import { checkCeilings } from '../tenants.js'
import type { Adoption } from './adoption.js'
import {
  type DrivenLog,
  type DrivenLogs,
  newPendingExecution,
  type EventPayload,
  type PendingExecution,
  type ExecutionRunner,
  type LiveSession,
} from './runner/index.js'
import { newId } from './ids.js'
import type { SessionRegistry } from './registry.js'
import type { SessionService } from './session-service.js'
import { toEvent, toExecution } from './views.js'

/** An execution as it is when read: its record, and its events so far in pages (never all at once). */
export interface ExecutionRead {
  /** The execution with no events. */
  execution: ExecutionT
  pages: () => AsyncGenerator<ExecutionT['events']>
}

export interface ExecutionsDeps {
  config: Config
  stores: Pick<Stores, 'executions' | 'logs'>
  feed: EventFeed
  sessions: SessionService
  registry: SessionRegistry
  adoption: Adoption
  runner: ExecutionRunner
  driven: DrivenLogs
}

export interface StreamedRunOptions {
  timeoutMs: number
  /** The driven log its events go to, with `tag` added to each (an LLM turn and its step number). */
  log: DrivenLog
  tag: Record<string, unknown>
  /** Sees each event before it is logged; false leaves it out of the log. */
  observe: (e: EventPayload) => boolean
  /** Called when the REPL starts it (it may first wait behind other executions). */
  onStart: (run: StreamedRun) => void
}

/** One REPL execution whose code arrives in pieces: each complete top-level statement runs as soon as it is complete. */
export class StreamedRun {
  /** Resolves with its done status (it may end before it starts, when the session goes away). */
  readonly done: Promise<DoneStatusT>
  private finished = false

  constructor(
    private readonly live: LiveSession,
    private readonly ex: PendingExecution,
    private readonly runner: ExecutionRunner,
  ) {
    this.done = new Promise((resolve) => {
      ex.onDone = (s) => {
        this.finished = true
        resolve(s)
      }
    })
  }

  get id(): string {
    return this.ex.id
  }
  get ended(): boolean {
    return this.finished
  }

  write(text: string): void {
    if (!this.finished) this.live.client.streamChunk(this.ex.id, text)
  }
  /** No more code: the REPL runs what is left and ends the execution. */
  end(): void {
    this.live.client.streamEnd(this.ex.id)
  }
  interrupt(): void {
    this.runner.interruptIfRunning(this.live, this.ex)
  }

  /** Sets a variable in the session's namespace. Throws ReplRequestError, ReplTimeoutError, ReplClosedError. */
  async setVariable(name: string, value: unknown, timeoutMs: number): Promise<void> {
    await this.live.client.request('set_var', { name, value }, timeoutMs)
  }
}

/** Code to queue in a session. */
interface Submission {
  code: string
  /** Its time limit in seconds (default: EXEC_TIMEOUT_S within the tenant's ceiling). */
  timeoutS?: number
  language?: 'python' | 'bash'
  /** Called with its `done` status at its end (a one-shot's clean-up). */
  onDone?: (status: DoneStatusT) => void
}

export class Executions {
  /** Executions queued here until they end: whether their end was recorded (see waitForEnd). */
  private readonly ends = new Map<string, Promise<boolean>>()
  /** What queueing logged first (the `status` event) of executions queued here until they end: a reader from the start needs no Redis read for it. */
  private readonly firsts = new Map<string, Appended>()

  constructor(private readonly deps: ExecutionsDeps) {}

  /**
   * Queues code; resolves with the execution id once its first event is logged.
   * Throws limit_exceeded, session_not_found, session_dead, queue_full, quota_exceeded.
   */
  async submit(tenant: string, sid: string, run: Submission): Promise<string> {
    const { config, sessions, adoption } = this.deps
    checkCeilings(config.tenantLimits.for(tenant), { timeout_s: run.timeoutS })
    // Held here: the record is not read first, queueing checks it in the same round trip (ExecutionRunner.enqueue).
    const here = adoption.attached(sid)
    const live = here?.tenant === tenant ? here : await sessions.usable(await sessions.record(tenant, sid))
    return this.queue(live, run)
  }

  /**
   * Like submit, in a session this instance has just created for the tenant and holds (a one-shot's):
   * its record was written here a moment ago, so it is not read again. Throws like submit.
   */
  async submitToNew(tenant: string, sid: string, run: Submission & Required<Pick<Submission, 'onDone'>>): Promise<string> {
    checkCeilings(this.deps.config.tenantLimits.for(tenant), { timeout_s: run.timeoutS })
    const live = this.deps.registry.get(sid)
    if (!live || live.tenant !== tenant) throw new AppError('session_not_found', `no session ${sid}`)
    return this.queue(live, run)
  }

  private async queue(live: LiveSession, { code, timeoutS, language, onDone }: Submission): Promise<string> {
    const { config, runner } = this.deps
    const timeout = timeoutS ?? Math.min(config.EXEC_TIMEOUT_S, config.tenantLimits.for(live.tenant).max_exec_timeout_s)
    const ex = newPendingExecution(newId('exe'), code, timeout * 1000)
    if (language === 'bash') ex.language = 'bash'
    const ended = new Promise<boolean>((resolve) => {
      ex.onDone = (status, recorded) => {
        this.ends.delete(ex.id)
        this.firsts.delete(ex.id)
        resolve(recorded)
        onDone?.(status)
      }
    })
    this.ends.set(ex.id, ended)
    try {
      const first = await runner.enqueue(live, ex)
      if (first && this.ends.has(ex.id)) this.firsts.set(ex.id, first)
    } catch (err) {
      this.ends.delete(ex.id)
      throw err
    }
    return ex.id
  }

  /** Queues a streamed execution (a step of an LLM turn). Throws like submit. */
  async runStreamed(tenant: string, sid: string, opts: StreamedRunOptions): Promise<StreamedRun> {
    const { sessions, runner } = this.deps
    const live = await sessions.usable(await sessions.record(tenant, sid))
    const ex = newPendingExecution(newId('exe'), '', opts.timeoutMs, 'stream', { logId: opts.log.id, tag: opts.tag, observe: opts.observe })
    const run = new StreamedRun(live, ex, runner)
    ex.onStart = () => opts.onStart(run)
    await runner.enqueue(live, ex)
    return run
  }

  /** Opens a log driven by the caller (an LLM turn), recorded as queued when the session is busy. Throws session_not_found, session_dead. */
  async openLog(tenant: string, sid: string, queued: boolean): Promise<DrivenLog> {
    const { sessions, runner, driven } = this.deps
    const live = await sessions.usable(await sessions.record(tenant, sid))
    return driven.create(sid, tenant, queued || runner.isBusy(live))
  }

  /** Interrupts the running execution, or else a driven log's work (an LLM turn between steps). Throws nothing_running. */
  async interrupt(tenant: string, sid: string): Promise<void> {
    const { sessions, registry, adoption, runner, driven } = this.deps
    const rec = await sessions.record(tenant, sid)
    // Nothing runs in a hibernated session: it is not woken for an interrupt.
    const live = registry.get(sid) ?? (rec.status === 'dead' || rec.status === 'hibernated' ? null : await adoption.ensureLocal(rec))
    if (live && runner.interrupt(live)) return
    if (driven.interruptSession(sid)) return
    throw new AppError('nothing_running', 'no execution is running in this session')
  }

  /** An execution with every event so far (up to the last one when it is read), in bounded pages. */
  async read(tenant: string, sid: string, eid: string): Promise<ExecutionRead> {
    const { stores } = this.deps
    // One round trip: the records, the last event and the first page, which is read after the last
    // event (same connection, in order), so it reaches at least that far when one page holds it all.
    // Nothing is shown until the records say the tenant may see it.
    const [rec, last, first] = await Promise.all([this.record(tenant, sid, eid), stores.logs.lastEvent(sid, eid), stores.logs.readEvents(sid, eid, '')])
    let prefetched: LoggedEvent[] | null = first
    return {
      execution: toExecution(rec, []),
      pages: async function* () {
        if (!last) return
        let after = ''
        while (after !== last.id) {
          const read = prefetched ?? (await stores.logs.readEvents(sid, eid, after))
          prefetched = null
          const page = read.filter((e) => !isAfter(e.id, last.id))
          if (page.length === 0) return // the log was dropped or trimmed meanwhile
          yield page.map(toEvent)
          after = page.at(-1)!.id
        }
      },
    }
  }

  /** Checks access and returns the record; 404 when it is missing or another tenant's. */
  async record(tenant: string, sid: string, eid: string): Promise<ExecutionRecord> {
    // Both in one round trip; the session's check comes first.
    const [, rec] = await Promise.all([this.deps.sessions.record(tenant, sid), this.deps.stores.executions.getExecution(sid, eid)])
    if (!rec || rec.tenant !== tenant) throw new AppError('execution_not_found', `no execution ${eid} in session ${sid}`)
    return rec
  }

  /** Streams an execution's events after `afterId` until its `done` (see EventFeed.follow). */
  follow(sid: string, eid: string, afterId: string, onEvent: (e: LoggedEvent) => Promise<void> | void, signal: AbortSignal): Promise<boolean> {
    const seed = afterId === '' ? this.firsts.get(eid) : undefined
    return this.deps.feed.follow(sid, eid, afterId, onEvent, signal, this.deps.registry.has(sid), seed)
  }

  /** How many events follow `afterId` (0 when it is the last). */
  async eventsAfter(sid: string, eid: string, afterId: string): Promise<number> {
    return (await this.deps.stores.logs.readEvents(sid, eid, afterId, 1)).length
  }

  /** Waits for an execution's end (for JSON clients, who then read it): follows its log from its last event to its `done`. */
  async waitForEnd(sid: string, eid: string, signal: AbortSignal): Promise<void> {
    const here = this.ends.get(eid)
    if (!here) return this.followToEnd(sid, eid, signal)
    // Queued here: its recorded end is known in memory, without reading its log once more. The log
    // is followed meanwhile all the same, should this instance let go of the session before the end.
    const ac = new AbortController()
    const stop = () => ac.abort()
    signal.addEventListener('abort', stop)
    try {
      await Promise.race([here.then((recorded) => (recorded ? undefined : new Promise<never>(() => undefined))), this.followToEnd(sid, eid, ac.signal)])
    } finally {
      signal.removeEventListener('abort', stop)
      ac.abort()
    }
  }

  private async followToEnd(sid: string, eid: string, signal: AbortSignal): Promise<void> {
    const last = await this.deps.stores.logs.lastEvent(sid, eid)
    if (last?.type === 'done') return
    await this.follow(sid, eid, last?.id ?? '', () => undefined, signal)
  }
}
