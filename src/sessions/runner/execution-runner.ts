// Runs a session's executions on the instance attached to it: a FIFO queue, REPL frames turned
// into events in order, a timeout that interrupts and then kills, and exactly one `done` each.
// It is the one owner of execution state (LiveSession.work and each PendingExecution).
import type { Logger } from 'pino'
import type { Config } from '../../config.js'
import { AppError } from '../../errors.js'
import type { DoneStatusT } from '../../schemas.js'
import type { SandboxDriver, SandboxExit } from '../../sandbox/driver.js'
import type { ReplFrame } from '../../repl/protocol.js'
import type { EventFeed } from '../../store/event-feed.js'
import type { Appended } from '../../store/event-bytes.js'
import type { EventLogStore } from '../../store/event-log-store.js'
import type { ExecutionStore } from '../../store/execution-store.js'
import type { QuotaStore } from '../../store/quota-store.js'
import type { ExecutionRecord } from '../../store/records.js'
import { busyDeadline, countOf, frameToEvent, newPendingExecution, ownsLog, queuedRecord, unrefTimer, type PendingExecution } from './execution.js'
import { NOT_STARTED_ERROR, sandboxGoneError, sandboxKilledError } from './sandbox-errors.js'
import { ExecutionLog } from './execution-log.js'
import { executionFrames, framesToReplay, LiveOverlap } from './log-replay.js'
import { SlotHolds } from './slot-hold.js'
import type { LiveSession } from './live-session.js'
import type { LlmRequestHandler, RunningExecution } from './llm-requests.js'
import type { Metrics } from '../../metrics.js'
import { retry } from '../../retry.js'

/** The parts of the stores, feed and driver the runner uses (narrow, so unit tests can stand in for them). */
export interface RunnerStores {
  executions: Pick<ExecutionStore, 'startExecution' | 'recordStart' | 'recordEnd'>
  logs: Pick<EventLogStore, 'appendLive' | 'appendLiveMany' | 'resumePoint'>
  quotas: Pick<QuotaStore, 'acquireRunningSlot' | 'releaseRunningSlot'>
}

export interface RunnerDeps {
  config: Config
  stores: RunnerStores
  feed: Pick<EventFeed, 'deliver'>
  driver: Pick<SandboxDriver, 'kill' | 'readStdoutLog'>
  log: Logger
  metrics: Metrics
  llmRequests?: LlmRequestHandler
  /**
   * The runner cannot go on with the session: an execution's end could not be recorded (Redis),
   * or its sandbox could not be killed (Docker). Its executions have ended here; the session is let
   * go, to be finished from Redis and its container (or removed) by whichever instance comes next.
   * Lost: Redis refused a write because the session's lease passed to another instance (this one
   * was paused, or looked gone): that one relays the sandbox and ends the executions.
   */
  letGo?: (live: LiveSession, why: 'unrecorded' | 'unkillable' | 'lost') => void
}

export class ExecutionRunner {
  private readonly config: Config
  private readonly stores: RunnerStores
  private readonly log: Logger
  private readonly events: ExecutionLog

  /** Slots of executions whose `done` may have been forged, kept until the next one starts. */
  private readonly holds: SlotHolds

  constructor(private readonly deps: RunnerDeps) {
    this.config = deps.config
    this.stores = deps.stores
    this.log = deps.log
    this.holds = new SlotHolds(deps.config, deps.stores.quotas, deps.log)
    this.events = new ExecutionLog(deps)
  }

  /** Whether anything runs or waits in the session. */
  isBusy(live: LiveSession): boolean {
    const w = live.work
    return w.running !== null || w.queue.length > 0 || w.reserved > 0
  }

  /** The running execution's id, the log it writes to, and a way to add the host's own events to it. */
  running(live: LiveSession): RunningExecution | undefined {
    const ex = live.work.running
    if (!ex) return undefined
    return {
      id: ex.id,
      logId: ex.target.logId,
      note: (event) => {
        if (!ex.ended) this.events.append(live, ex, event)
      },
    }
  }

  /** Whether the execution `eid` runs or waits in the session on this instance. */
  has(live: LiveSession, eid: string): boolean {
    return this.all(live).some((ex) => ex.id === eid)
  }

  /**
   * Records and queues an execution, in one Redis round trip that also checks the session's record
   * (there, the tenant's, not dead); resolves with what that added to its log (its `status` event).
   * Throws AppError queue_full, quota_exceeded, session_dead, session_not_found.
   */
  async enqueue(live: LiveSession, ex: PendingExecution): Promise<Appended | null> {
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
    let added: Appended | null = null
    try {
      ex.announcedRunning = !busy
      // Nothing runs or waits before it: it starts once recorded, and the same round trip records its start.
      if (!busy) ex.startedAt = Date.now()
      const status = ownsLog(ex) ? { type: 'status', state: busy ? 'queued' : 'running', execution_id: ex.id } : null
      const slot = { max: maxRunning, untilMs: slotUntil, ...(busy ? {} : { idleDeadlineMs: busyDeadline(live, ex, this.config) }) }
      const started = await this.stores.executions.startExecution(queuedRecord(live, ex), status, slot, live.term)
      if (started.result === 'no_slot')
        throw new AppError('quota_exceeded', `tenant has ${maxRunning} executions queued or running (the maximum)`, { headers: { 'retry-after': '1' } })
      if (started.result === 'no_session') throw new AppError('session_not_found', `no session ${live.id}`)
      if (started.result === 'dead') throw new AppError('session_dead', started.why || "the session's sandbox has died; restart it or create a new session")
      if (started.result === 'lost') {
        this.deps.letGo?.(live, 'lost')
        throw new AppError('session_moving', 'the session is moving between API instances; try again in a moment', { headers: { 'retry-after': '1' } })
      }
      if (started.result === 'started') added = started.added
    } catch (err) {
      // An error in the round trip itself may have left the slot taken.
      if (!(err instanceof AppError)) await this.stores.quotas.releaseRunningSlot(live.tenant, ex.id).catch(() => undefined)
      throw err
    } finally {
      w.reserved--
    }
    if (ownsLog(ex)) this.events.started(live, ex, added)
    this.deps.metrics.executionsQueued.inc()
    if (live.state !== 'attached') {
      // Let go meanwhile (its lease passed on, the instance stopping): it is recorded, the next holder runs it (adopt-running.ts).
      if (live.state === 'released') return added
      // Deleted or restarted meanwhile: it ends at once, with its one `done`.
      w.queue.push(ex)
      ex.startedAt = 0
      this.events.append(live, ex, { type: 'error', ...NOT_STARTED_ERROR, traceback: [] })
      await this.finish(live, ex, 'killed')
      return null
    }
    w.queue.push(ex)
    this.runNext(live)
    return added
  }

  /** Starts the next queued execution when nothing runs. */
  runNext(live: LiveSession): void {
    const w = live.work
    if (w.running || live.state !== 'attached') return
    const ex = w.queue.shift()
    if (!ex) return
    w.running = ex
    // One that waited: the REPL starts at once, the start is recorded meanwhile, and the events are sent after it on
    // the same connection (execution-log.ts), so `status: running` comes first. Else enqueue recorded it.
    if (!ex.startedAt) {
      ex.startedAt = Date.now()
      const announce = ownsLog(ex) && !ex.announcedRunning
      const status = announce ? { type: 'status', state: 'running', execution_id: ex.id } : null
      const recorded = this.stores.executions.recordStart(live.id, ex.id, ex.startedAt, status, busyDeadline(live, ex, this.config), live.tenant)
      ex.chain = (announce ? this.events.written(live, ex, 1, recorded) : recorded).catch((err: unknown) =>
        this.log.error({ err, sessionId: live.id, executionId: ex.id }, 'could not record the start of an execution'),
      )
    }
    ex.timers.push(unrefTimer(ex.timeoutMs, () => this.interruptExecution(live, ex, 'timeout')))
    const sink = (f: ReplFrame) => this.onFrame(live, ex, f)
    const opts = { max_stream_bytes: live.outputBytes, max_image_bytes: this.config.MAX_IMAGE_BYTES, ...(ex.language ? { language: ex.language } : {}) }
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
    const why = sandboxGoneError(exit)
    const killedByUs = sandboxKilledError(this.config.INTERRUPT_GRACE_MS)
    for (const ex of this.all(live)) {
      const e = ex.forcedStatus && live.work.running === ex ? killedByUs : why
      this.events.append(live, ex, { type: 'error', ...e, traceback: [] })
    }
    await this.endAll(live, status)
  }

  /** The host gave up on a misbehaving sandbox: every execution gets an error saying why, then its `done` (error). */
  async sandboxMisbehaved(live: LiveSession, reason: string): Promise<void> {
    const evalue = `${reason}; the session was ended (restart it or create a new one)`
    for (const ex of this.all(live)) this.events.append(live, ex, { type: 'error', ename: 'SandboxMisbehaved', evalue, traceback: [] })
    await this.endAll(live, 'error')
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
   * meanwhile are read back from the container's log (those the host had not handled, by position;
   * a `limit` event when the log no longer reaches back that far), then the frames that arrived
   * since attaching (`early`) and live frames, less those the log already gave (log-replay.ts).
   * A streamed (LLM) step is interrupted: the turn that fed it is gone.
   */
  async resume(live: LiveSession, rx: ExecutionRecord, early: ReplFrame[]): Promise<void> {
    const started = rx.started_at ?? rx.created_at
    const ex = newPendingExecution(rx.id, rx.code ?? '', rx.timeout_ms ?? this.config.EXEC_TIMEOUT_S * 1000, rx.kind === 'stream' ? 'stream' : 'execute')
    if (rx.language === 'bash') ex.language = 'bash'
    ex.startedAt = started
    ex.announcedRunning = true
    live.work.running = ex
    const point = await this.stores.logs.resumePoint(live.id, rx.id)
    const raw = await this.deps.driver.readStdoutLog(live.containerId, started).catch((err: unknown) => {
      this.log.warn({ err }, 'could not read the sandbox log')
      return Buffer.alloc(0)
    })
    const logged = executionFrames(raw, rx.id)
    const { frames, lost } = framesToReplay(logged, point)
    ex.frames = point.pos
    if (lost) {
      this.log.warn({ sessionId: live.id, executionId: rx.id }, 'the sandbox log no longer reaches back to the last frame handled; output lost')
      // Under ids past any the instance before may have handed its readers for output Redis never got.
      const limit = { type: 'limit', what: 'detached_output' }
      await this.events.written(live, ex, 1, this.stores.logs.appendLiveMany(live.id, rx.id, [limit], live.tenant, 'jump', live.term))
    }
    for (const f of frames) this.onFrame(live, ex, f)
    const overlap = new LiveOverlap(logged)
    const onLive = (f: ReplFrame) => {
      if (overlap.isNew(f)) this.onFrame(live, ex, f)
    }
    for (const f of early) onLive(f)
    if (ex.ended) return
    live.client.track(rx.id, onLive)
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
    ex.frames++
    // The REPL starts an execution only once the one before it really ended.
    if (f.type === 'status' && f.state === 'running') void this.holds.release(live)
    if (f.type === 'done') {
      const reported = (['ok', 'error', 'interrupted'] as const).find((s) => s === f.status) ?? 'error'
      if (ex.language === 'bash') ex.exitCode = countOf(f.exit_code) ?? null
      // The code this `done` ends could have written it itself: its slot stays taken while others wait (slot-hold.ts).
      ex.chain = ex.chain.then(() => this.holds.hold(live, ex))
      void this.finish(live, ex, ex.forcedStatus ?? reported, countOf(f.execution_count))
      return
    }
    const event = frameToEvent(f, this.deps.llmRequests?.modelFor(ex.target.logId) ?? this.config.REPLCAST_MODEL)
    if (!event) return
    this.events.output(live, ex, event)
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
        void this.killSandbox(live, ex)
      }),
    )
  }

  /** SIGKILL (its exit then ends the executions); when the engine cannot do it, they end here and the reaper removes the sandbox. */
  private async killSandbox(live: LiveSession, ex: PendingExecution): Promise<void> {
    try {
      await retry(() => this.deps.driver.kill(live.containerId), { attempts: 3 })
    } catch (err) {
      if (ex.ended || live.state !== 'attached') return
      this.log.error({ err, sessionId: live.id, executionId: ex.id }, 'could not kill the sandbox; ending its executions and letting the reaper remove it')
      live.state = 'stopping'
      const evalue = `the code did not stop within ${this.config.INTERRUPT_GRACE_MS} ms of the interrupt and the sandbox could not be killed (the Docker engine did not answer); the session is being removed`
      for (const q of this.all(live)) this.events.append(live, q, { type: 'error', ename: 'SandboxError', evalue, traceback: [] })
      await this.endAll(live, 'killed')
      this.deps.letGo?.(live, 'unkillable')
    }
  }

  private async finish(live: LiveSession, ex: PendingExecution, status: DoneStatusT, executionCount?: number): Promise<void> {
    if (ex.ended) return
    ex.ended = true
    for (const t of ex.timers) clearTimeout(t)
    live.client.forget(ex.id)
    if (ex.droppedBytes > 0) this.events.append(live, ex, { type: 'limit', what: 'event_bytes', dropped_bytes: ex.droppedBytes })
    // Output that came with the end (print(1) and its done arrive together) goes with it.
    const before = this.events.claim(ex)
    const end = Date.now()
    await ex.chain
    await this.holds.release(live, ex)
    const w = live.work
    if (w.running === ex) w.running = null
    else w.queue = w.queue.filter((q) => q !== ex)
    const alive = live.state === 'attached'
    const recorded = await this.events.end(live, ex, status, executionCount, { end, alive }, before)
    this.deps.llmRequests?.executionEnded(ex.id)
    ex.onDone?.(status, recorded)
    // Unrecorded, the execution is still running in Redis: adopting the session again (the next
    // request for it, or the reaper) reads its end back from the container's log.
    if (!recorded && live.state === 'attached') this.deps.letGo?.(live, 'unrecorded')
    else if (alive) this.runNext(live)
  }

  private all(live: LiveSession): PendingExecution[] {
    return [...(live.work.running ? [live.work.running] : []), ...live.work.queue]
  }
}
