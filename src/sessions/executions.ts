// The way in to a session's executions, for the HTTP routes and the agent: submit code, run code
// that arrives in pieces (StreamedRun), open a log that the caller drives (an LLM turn), interrupt,
// and read or follow an execution's events from Redis (from any instance).
import type { Config } from '../config.js'
import { AppError } from '../errors.js'
import type { DoneStatusT, ExecutionT } from '../schemas.js'
import type { EventFeed } from '../store/event-feed.js'
import type { ExecutionRecord, LoggedEvent, RedisStore } from '../store/redis-store.js'
import { checkCeilings } from '../tenants.js'
import type { Adoption } from './adoption.js'
import type { DrivenLog, DrivenLogs } from './driven-logs.js'
import { newPendingExecution, type EventPayload, type PendingExecution } from './execution.js'
import type { ExecutionRunner } from './execution-runner.js'
import { newId } from './ids.js'
import type { LiveSession } from './live-session.js'
import type { SessionRegistry } from './registry.js'
import type { SessionService } from './session-service.js'
import { toExecution } from './views.js'

export interface ExecutionsDeps {
  config: Config
  store: RedisStore
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

export class Executions {
  constructor(private readonly deps: ExecutionsDeps) {}

  /** Queues code; resolves with the execution id once its first event is logged. Throws limit_exceeded, session_not_found, session_dead, queue_full, quota_exceeded. */
  async submit(tenant: string, sid: string, code: string, timeoutS?: number): Promise<string> {
    const { config, sessions, runner } = this.deps
    const tl = config.tenantLimits.for(tenant)
    checkCeilings(tl, { timeout_s: timeoutS })
    const timeout = timeoutS ?? Math.min(config.EXEC_TIMEOUT_S, tl.max_exec_timeout_s)
    const live = await sessions.usable(await sessions.record(tenant, sid))
    const ex = newPendingExecution(newId('exe'), code, timeout * 1000)
    await runner.enqueue(live, ex)
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
    const live = registry.get(sid) ?? (rec.status === 'dead' ? null : await adoption.ensureLocal(rec))
    if (live && runner.interrupt(live)) return
    if (driven.interruptSession(sid)) return
    throw new AppError('nothing_running', 'no execution is running in this session')
  }

  /** An execution with every event so far. */
  async get(tenant: string, sid: string, eid: string): Promise<ExecutionT> {
    const rec = await this.record(tenant, sid, eid)
    const { store } = this.deps
    const events: LoggedEvent[] = []
    for (let page = await store.readEvents(sid, eid, ''); page.length; page = await store.readEvents(sid, eid, page[page.length - 1]!.id)) events.push(...page)
    return toExecution(rec, events)
  }

  /** Checks access and returns the record; 404 when it is missing or another tenant's. */
  async record(tenant: string, sid: string, eid: string): Promise<ExecutionRecord> {
    await this.deps.sessions.record(tenant, sid)
    const rec = await this.deps.store.getExecution(sid, eid)
    if (!rec || rec.tenant !== tenant) throw new AppError('execution_not_found', `no execution ${eid} in session ${sid}`)
    return rec
  }

  /** Streams an execution's events after `afterId` until its `done` (see EventFeed.follow). */
  follow(sid: string, eid: string, afterId: string, onEvent: (e: LoggedEvent) => Promise<void> | void, signal: AbortSignal): Promise<boolean> {
    return this.deps.feed.follow(sid, eid, afterId, onEvent, signal, this.deps.registry.has(sid))
  }

  /** How many events follow `afterId` (0 when it is the last). */
  async eventsAfter(sid: string, eid: string, afterId: string): Promise<number> {
    return (await this.deps.store.readEvents(sid, eid, afterId, 1)).length
  }

  /** Waits for an execution's end (for JSON clients) and returns it whole, from the events read while following. */
  async wait(tenant: string, sid: string, eid: string, signal: AbortSignal): Promise<ExecutionT> {
    const events: LoggedEvent[] = []
    await this.follow(
      sid,
      eid,
      '',
      (e) => {
        events.push(e)
      },
      signal,
    )
    return toExecution(await this.record(tenant, sid, eid), events)
  }
}
