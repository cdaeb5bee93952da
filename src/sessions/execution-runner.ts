// Runs a session's executions on the instance attached to it: a FIFO queue, REPL frames turned
// into events in order, a timeout that interrupts and then kills, and exactly one `done` each.
// It is the one owner of execution state (LiveSession.work and each PendingExecution).
import type { Logger } from 'pino'
import type { Config } from '../config.js'
import { AppError } from '../errors.js'
import type { DoneStatusT } from '../schemas.js'
import type { DockerSandboxDriver } from '../sandbox/docker-driver.js'
import { parseFrame } from '../repl/repl-client.js'
import type { ReplFrame } from '../repl/protocol.js'
import type { EventFeed } from '../store/event-feed.js'
import type { ExecutionRecord, RedisStore } from '../store/redis-store.js'
import { frameToEvent, newPendingExecution, ownsLog, unrefTimer, type EventPayload, type PendingExecution } from './execution.js'
import type { LiveSession } from './live-session.js'
import type { LlmRequestHandler } from './llm-requests.js'
import type { Metrics } from './metrics.js'

/** Per-event overhead counted against an execution's byte budget (so floods of tiny frames count). */
const FRAME_OVERHEAD_BYTES = 64
/** Rich events (results, displays, errors) an execution may log at the image size cap. */
const IMAGES_PER_EXECUTION = 4
const BASE64_GROWTH = 1.4

/** The parts of the store, feed and driver the runner uses (narrow, so unit tests can stand in for them). */
export type RunnerStore = Pick<
  RedisStore,
  'acquireRunningSlot' | 'releaseRunningSlot' | 'createExecution' | 'recordStart' | 'recordEnd' | 'appendEvent' | 'lastSeq'
>

export interface RunnerDeps {
  config: Config
  store: RunnerStore
  feed: Pick<EventFeed, 'notify'>
  driver: Pick<DockerSandboxDriver, 'kill' | 'readStdoutLog'>
  log: Logger
  metrics: Metrics
  llmRequests?: LlmRequestHandler
}

/** Why a sandbox's executions end when it went away. */
export interface SandboxExit {
  oomKilled: boolean
  exitCode: number | null
}

export class ExecutionRunner {
  private readonly config: Config
  private readonly store: RunnerStore
  private readonly log: Logger

  constructor(private readonly deps: RunnerDeps) {
    this.config = deps.config
    this.store = deps.store
    this.log = deps.log
  }

  /** Whether anything runs or waits in the session. */
  isBusy(live: LiveSession): boolean {
    const w = live.work
    return w.running !== null || w.queue.length > 0 || w.reserved > 0
  }

  /** The running execution's id and the log it writes to. */
  running(live: LiveSession): { id: string; logId: string } | undefined {
    const ex = live.work.running
    return ex ? { id: ex.id, logId: ex.target.logId } : undefined
  }

  /** Records and queues an execution. Throws AppError queue_full, quota_exceeded, session_dead. */
  async enqueue(live: LiveSession, ex: PendingExecution): Promise<void> {
    if (live.state !== 'attached') throw new AppError('session_dead', 'the session is going away')
    const w = live.work
    // Places are taken synchronously (reserved), so concurrent submits see each other.
    const ahead = w.queue.length + w.reserved
    const busy = w.running !== null || ahead > 0
    // When nothing runs yet, the first of those ahead is about to run rather than wait.
    const waiting = w.running !== null ? ahead : Math.max(0, ahead - 1)
    if (busy && waiting >= this.config.EXEC_QUEUE_DEPTH) {
      throw new AppError('queue_full', `${waiting} executions are already waiting in this session (the maximum is ${this.config.EXEC_QUEUE_DEPTH})`)
    }
    const maxRunning = this.config.tenantLimits.for(live.tenant).max_concurrent_executions
    // The slot frees itself if nothing releases it: after this execution and the ones before it could all have timed out.
    const slotUntil = Date.now() + (ahead + 2) * (ex.timeoutMs + this.config.INTERRUPT_GRACE_MS)
    w.reserved++
    let slot = false
    try {
      slot = await this.store.acquireRunningSlot(live.tenant, ex.id, maxRunning, slotUntil)
      if (!slot)
        throw new AppError('quota_exceeded', `tenant has ${maxRunning} executions queued or running (the maximum)`, { headers: { 'retry-after': '1' } })
      ex.announcedRunning = !busy
      const status = ownsLog(ex) ? { type: 'status', state: busy ? 'queued' : 'running', execution_id: ex.id } : null
      await this.store.createExecution(
        {
          id: ex.id,
          session_id: live.id,
          tenant: live.tenant,
          status: 'queued',
          created_at: Date.now(),
          started_at: null,
          ended_at: null,
          duration_ms: null,
          execution_count: null,
          kind: ex.kind,
          code: ex.code,
          timeout_ms: ex.timeoutMs,
        },
        status,
      )
    } catch (err) {
      if (slot) await this.store.releaseRunningSlot(live.tenant, ex.id).catch(() => undefined)
      throw err
    } finally {
      w.reserved--
    }
    if (ownsLog(ex)) this.deps.feed.notify(live.id, ex.id)
    this.deps.metrics.executionsQueued.inc()
    w.queue.push(ex)
    if (live.state !== 'attached') {
      // The session went away while this was being recorded: it ends at once, with its one `done`.
      this.logEvent(live, ex, {
        type: 'error',
        ename: 'SandboxError',
        evalue: 'the session was deleted or restarted before this execution started',
        traceback: [],
      })
      await this.finish(live, ex, 'killed')
      return
    }
    this.runNext(live)
  }

  /** Starts the next queued execution when nothing runs. */
  runNext(live: LiveSession): void {
    const w = live.work
    if (w.running || live.state !== 'attached') return
    const ex = w.queue.shift()
    if (!ex) return
    w.running = ex
    ex.startedAt = Date.now()
    // The REPL starts at once; the start is recorded meanwhile, and the execution's events are
    // appended after it (they chain on ex.chain), so `status: running` still comes first.
    const deadline = ex.startedAt + ex.timeoutMs + this.config.INTERRUPT_GRACE_MS + live.idleTimeoutS * 1000
    const announce = ownsLog(ex) && !ex.announcedRunning
    ex.chain = this.store
      .recordStart(live.id, ex.id, ex.startedAt, announce ? { type: 'status', state: 'running', execution_id: ex.id } : null, deadline)
      .then(() => {
        if (announce) this.deps.feed.notify(live.id, ex.id)
      })
      .catch((err: unknown) => this.log.error({ err, sessionId: live.id, executionId: ex.id }, 'could not record the start of an execution'))
    ex.timers.push(unrefTimer(ex.timeoutMs, () => this.interruptExecution(live, ex, 'timeout')))
    const sink = (f: ReplFrame) => this.onFrame(live, ex, f)
    const opts = { max_stream_bytes: live.outputBytes, max_image_bytes: this.config.MAX_IMAGE_BYTES }
    if (ex.kind === 'stream') {
      live.client.streamBegin(ex.id, sink, opts)
      ex.onStart?.()
    } else live.client.execute(ex.id, ex.code, sink, opts)
  }

  /** Interrupts the running execution; false when nothing runs. */
  interrupt(live: LiveSession): boolean {
    const ex = live.work.running
    if (!ex) return false
    this.interruptExecution(live, ex, 'interrupted')
    return true
  }

  /** Interrupts `ex` if it is the one running (a streamed run's own interrupt). */
  interruptIfRunning(live: LiveSession, ex: PendingExecution): void {
    if (live.work.running === ex) this.interruptExecution(live, ex, 'interrupted')
  }

  /** The sandbox went away: every execution gets an error saying why, then its `done`. */
  async sandboxGone(live: LiveSession, exit: SandboxExit): Promise<void> {
    const status: DoneStatusT = exit.oomKilled ? 'oom' : 'killed'
    const why = exit.oomKilled
      ? { ename: 'SandboxOutOfMemory', evalue: 'the sandbox ran out of memory (limits.memory_mb) and was killed' }
      : { ename: 'SandboxDied', evalue: `the sandbox stopped unexpectedly (exit code ${exit.exitCode ?? 'unknown'}); restart the session or create a new one` }
    const killedByUs = {
      ename: 'SandboxKilled',
      evalue: `the code did not stop within ${this.config.INTERRUPT_GRACE_MS} ms of the interrupt, so the sandbox was killed; restart the session to continue`,
    }
    for (const ex of this.all(live)) {
      const e = ex.forcedStatus && live.work.running === ex ? killedByUs : why
      this.logEvent(live, ex, { type: 'error', ...e, traceback: [] })
    }
    await this.endAll(live, status)
  }

  /** Ends the running and queued executions with `status` (the sandbox is going away). */
  async endAll(live: LiveSession, status: DoneStatusT): Promise<void> {
    await Promise.all(this.all(live).map((ex) => this.finish(live, ex, ex.forcedStatus ?? status)))
  }

  /** This instance lets go of the session: timers of executions it no longer drives must not fire (a re-adoption re-arms them). */
  abandon(live: LiveSession): void {
    for (const ex of this.all(live)) ex.timers.forEach(clearTimeout)
  }

  /** Queues executions that were waiting when the session was adopted; starts the first unless one is being resumed. */
  requeue(live: LiveSession, pending: PendingExecution[]): void {
    live.work.queue.push(...pending)
    this.runNext(live)
  }

  /**
   * Picks up an execution that kept running while no instance was attached: the frames it wrote
   * meanwhile are read back from the container's log (deduplicated by the REPL's seq), then the
   * frames that arrived since attaching (`early`), then live frames. A streamed (LLM) step is
   * interrupted: the turn that fed it is gone.
   */
  async resume(live: LiveSession, rx: ExecutionRecord, early: ReplFrame[]): Promise<void> {
    const started = rx.started_at ?? rx.created_at
    const ex = newPendingExecution(rx.id, rx.code ?? '', rx.timeout_ms ?? this.config.EXEC_TIMEOUT_S * 1000, rx.kind === 'stream' ? 'stream' : 'execute')
    ex.startedAt = started
    ex.announcedRunning = true
    live.work.running = ex
    let lastSeq = await this.store.lastSeq(live.id, rx.id)
    const replay = (f: ReplFrame) => {
      if (typeof f.seq === 'number') {
        if (f.seq <= lastSeq) return
        lastSeq = f.seq
      }
      this.onFrame(live, ex, f)
    }
    const logged = await this.deps.driver.readStdoutLog(live.containerId, started).catch((err: unknown) => {
      this.log.warn({ err }, 'could not read the sandbox log')
      return Buffer.alloc(0)
    })
    for (const line of logged.toString('utf8').split('\n')) {
      const f = parseFrame(line)
      if (f && f.exec_id === rx.id) replay(f)
    }
    for (const f of early) replay(f)
    if (ex.ended) return
    live.client.track(rx.id, replay)
    if (ex.kind === 'stream') {
      this.interruptExecution(live, ex, 'interrupted')
    } else {
      const left = Math.max(0, started + ex.timeoutMs - Date.now())
      ex.timers.push(unrefTimer(left, () => this.interruptExecution(live, ex, 'timeout')))
    }
  }

  /** Turns one REPL frame of `ex` into its event (or its end). */
  private onFrame(live: LiveSession, ex: PendingExecution, f: ReplFrame): void {
    if (ex.ended) return
    if (f.type === 'done') {
      const reported = (['ok', 'error', 'interrupted'] as const).find((s) => s === f.status) ?? 'error'
      void this.finish(live, ex, ex.forcedStatus ?? reported, typeof f.execution_count === 'number' ? f.execution_count : undefined)
      return
    }
    const event = frameToEvent(f, this.deps.llmRequests?.modelFor(ex.target.logId) ?? this.config.REPLCAST_MODEL)
    if (!event) return
    // The REPL caps output, but its channel lives in the same process as the user's code: the host
    // counts too, so no sandbox can fill Redis. The budget leaves the REPL's own caps room to act first.
    const size = JSON.stringify(event).length + FRAME_OVERHEAD_BYTES
    const text = event.type === 'stdout' || event.type === 'stderr'
    const budget = text ? 2 * live.outputBytes : IMAGES_PER_EXECUTION * this.config.MAX_IMAGE_BYTES * BASE64_GROWTH
    const used = text ? ex.loggedBytes.text : ex.loggedBytes.rich
    if (used + size > budget) {
      ex.droppedBytes += size
      return
    }
    if (text) ex.loggedBytes.text += size
    else ex.loggedBytes.rich += size
    this.logEvent(live, ex, event)
  }

  /** Interrupt, then SIGKILL after the grace period if the REPL does not end the execution. */
  private interruptExecution(live: LiveSession, ex: PendingExecution, reason: 'interrupted' | 'timeout'): void {
    if (ex.ended) return
    if (reason === 'timeout') ex.forcedStatus = 'timeout'
    live.client.interrupt()
    ex.timers.push(
      unrefTimer(this.config.INTERRUPT_GRACE_MS, () => {
        if (ex.ended) return
        this.log.warn({ sessionId: live.id, executionId: ex.id }, 'REPL ignored the interrupt; killing the sandbox')
        ex.forcedStatus = reason === 'timeout' ? 'timeout' : 'killed'
        void this.deps.driver.kill(live.containerId)
      }),
    )
  }

  private async finish(live: LiveSession, ex: PendingExecution, status: DoneStatusT, executionCount?: number): Promise<void> {
    if (ex.ended) return
    ex.ended = true
    for (const t of ex.timers) clearTimeout(t)
    live.client.forget(ex.id)
    if (ex.droppedBytes > 0) this.logEvent(live, ex, { type: 'limit', what: 'event_bytes', dropped_bytes: ex.droppedBytes })
    const end = Date.now()
    const started = ex.startedAt || end
    const duration = end - started
    await ex.chain
    const w = live.work
    if (w.running === ex) w.running = null
    else w.queue = w.queue.filter((q) => q !== ex)
    const alive = live.state === 'attached'
    const done = ownsLog(ex)
      ? { type: 'done', status, ...(executionCount !== undefined ? { execution_count: executionCount } : {}), duration_ms: duration }
      : null
    const fields = { status, ended_at: end, duration_ms: duration, execution_count: executionCount ?? null, ...(ex.startedAt ? {} : { started_at: null }) }
    const session = alive
      ? {
          fields: {
            status: w.queue.length ? ('busy' as const) : ('ready' as const),
            last_active_at: end,
            ...(executionCount !== undefined ? { execution_count: executionCount } : {}),
          },
          deadlineMs: end + live.idleTimeoutS * 1000,
        }
      : null
    try {
      await this.store.recordEnd(live.id, ex.id, live.tenant, done, fields, session)
      if (done) this.deps.feed.notify(live.id, ex.id)
    } catch (err) {
      this.log.error({ err, sessionId: live.id, executionId: ex.id }, 'could not record the end of an execution')
    }
    this.deps.metrics.executions.inc({ status })
    this.deps.metrics.executionSeconds.observe(duration / 1000)
    this.deps.llmRequests?.executionEnded(ex.id)
    ex.onDone?.(status)
    if (alive) this.runNext(live)
  }

  /** Logs an event of `ex` after the ones before it, where its target says. */
  private logEvent(live: LiveSession, ex: PendingExecution, event: EventPayload): void {
    const { logId, tag, observe } = ex.target
    if (observe && !observe(event)) return
    ex.chain = ex.chain
      .then(async () => {
        await this.store.appendEvent(live.id, logId, { ...event, ...tag })
        this.deps.feed.notify(live.id, logId)
      })
      .catch((err: unknown) => this.log.error({ err, sessionId: live.id, executionId: ex.id }, 'event append failed'))
  }

  private all(live: LiveSession): PendingExecution[] {
    return [...(live.work.running ? [live.work.running] : []), ...live.work.queue]
  }
}
