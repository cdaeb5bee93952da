// Runs a session's executions on the instance attached to it: a FIFO queue, REPL frames turned
// into events in order, a timeout that interrupts and then kills, and exactly one `done` each.
import type { Logger } from 'pino'
import type { Config } from '../config.js'
import { AppError } from '../errors.js'
import type { DoneStatusT } from '../schemas.js'
import type { DockerSandboxDriver } from '../sandbox/docker-driver.js'
import type { ReplClient } from '../repl/repl-client.js'
import type { ReplFrame } from '../repl/protocol.js'
import type { EventFeed } from '../store/event-feed.js'
import type { RedisStore } from '../store/redis-store.js'
import { frameToEvent, unrefTimer, type EventPayload, type PendingExecution } from './execution.js'
import type { Metrics } from './metrics.js'

/** Per-event overhead counted against an execution's byte budget (so floods of tiny frames count). */
const FRAME_OVERHEAD_BYTES = 64
/** Rich events (results, displays, errors) an execution may log at the image size cap. */
const IMAGES_PER_EXECUTION = 4
const BASE64_GROWTH = 1.4

/** A session this instance is attached to. */
export interface LiveSession {
  id: string
  tenant: string
  containerId: string
  client: ReplClient
  queue: PendingExecution[]
  running: PendingExecution | null
  /** Submits between their checks and their place in the queue (their Redis writes are in flight). */
  reserved: number
  /** False once the instance let go of it (detached, replaced, deleted). */
  attached: boolean
  /** True while the host itself stops the container (restart, delete), so the exit is expected. */
  stopping: boolean
  idleTimeoutS: number
  outputBytes: number
}

export interface RunnerDeps {
  config: Config
  store: RedisStore
  feed: EventFeed
  driver: DockerSandboxDriver
  log: Logger
  metrics: Metrics
  /** The model an execution's llm_query/llm_batch use when the code names none (for llm_call events). */
  llmModelFor?: (execId: string) => string
  /** Called once when an execution has ended (its `done` is written). */
  onExecutionEnd?: (execId: string) => void
}

export class ExecutionRunner {
  private readonly config: Config
  private readonly store: RedisStore
  private readonly log: Logger

  constructor(private readonly deps: RunnerDeps) {
    this.config = deps.config
    this.store = deps.store
    this.log = deps.log
  }

  /** Queues an execution object driven by the caller (the agent's streamed code). */
  async enqueue(live: LiveSession, ex: PendingExecution): Promise<void> {
    if (!live.attached || live.stopping) throw new AppError('session_dead', 'the session is going away')
    // Places are taken synchronously (reserved), so concurrent submits see each other.
    const ahead = live.queue.length + live.reserved
    const busy = live.running !== null || ahead > 0
    // When nothing runs yet, the first of those ahead is about to run rather than wait.
    const waiting = live.running !== null ? ahead : Math.max(0, ahead - 1)
    if (busy && waiting >= this.config.EXEC_QUEUE_DEPTH) {
      throw new AppError('queue_full', `${waiting} executions are already waiting in this session (the maximum is ${this.config.EXEC_QUEUE_DEPTH})`)
    }
    const maxRunning = this.config.tenantLimits.for(live.tenant).max_concurrent_executions
    // The slot frees itself if nothing releases it: after this execution and the ones before it could all have timed out.
    const slotUntil = Date.now() + (ahead + 2) * (ex.timeoutMs + this.config.INTERRUPT_GRACE_MS)
    live.reserved++
    let slot = false
    try {
      slot = await this.store.acquireRunningSlot(live.tenant, ex.id, maxRunning, slotUntil)
      if (!slot) throw new AppError('quota_exceeded', `tenant has ${maxRunning} executions queued or running (the maximum)`, { headers: { 'retry-after': '1' } })
      ex.announcedRunning = !busy
      const status = { type: 'status', state: busy ? 'queued' : 'running', execution_id: ex.id }
      await this.store.createExecution({ id: ex.id, session_id: live.id, tenant: live.tenant, status: 'queued', created_at: Date.now(), started_at: null, ended_at: null, duration_ms: null, execution_count: null, kind: ex.kind, code: ex.code, timeout_ms: ex.timeoutMs }, status)
    } catch (err) {
      if (slot) await this.store.releaseRunningSlot(live.tenant, ex.id).catch(() => undefined)
      throw err
    } finally {
      live.reserved--
    }
    this.deps.feed.notify(live.id, ex.id)
    this.deps.metrics.executionsQueued.inc()
    live.queue.push(ex)
    if (!live.attached || live.stopping) {
      // The session went away while this was being recorded: it ends at once, with its one `done`.
      ex.chain = this.append(live.id, ex.id, { type: 'error', ename: 'SandboxError', evalue: 'the session was deleted or restarted before this execution started', traceback: [] }).catch(() => undefined)
      await this.finish(live, ex, 'killed')
      return
    }
    this.runNext(live)
  }

  runNext(live: LiveSession): void {
    if (live.running || !live.attached) return
    const ex = live.queue.shift()
    if (!ex) return
    live.running = ex
    ex.startedAt = Date.now()
    // The REPL starts at once; the start is recorded meanwhile, and the execution's events are
    // appended after it (they chain on ex.chain), so `status: running` still comes first.
    const deadline = ex.startedAt + ex.timeoutMs + this.config.INTERRUPT_GRACE_MS + live.idleTimeoutS * 1000
    ex.chain = this.store.recordStart(live.id, ex.id, ex.startedAt, ex.announcedRunning ? null : { type: 'status', state: 'running', execution_id: ex.id }, deadline)
      .then(() => { if (!ex.announcedRunning) this.deps.feed.notify(live.id, ex.id) })
      .catch((err) => this.log.error({ err, sessionId: live.id, executionId: ex.id }, 'could not record the start of an execution'))
    ex.timers.push(unrefTimer(ex.timeoutMs, () => this.interruptRunning(live, ex, 'timeout')))
    const sink = (f: ReplFrame) => this.onFrame(live, ex, f)
    const opts = { max_stream_bytes: live.outputBytes, max_image_bytes: this.config.MAX_IMAGE_BYTES }
    if (ex.kind === 'stream') { live.client.streamBegin(ex.id, sink, opts); ex.onStart?.() }
    else live.client.execute(ex.id, ex.code, sink, opts)
  }

  /** Turns one REPL frame of `ex` into its event (or its end). */
  onFrame(live: LiveSession, ex: PendingExecution, f: ReplFrame): void {
    if (ex.ended) return
    if (f.type === 'done') {
      const reported = (['ok', 'error', 'interrupted'] as const).find((s) => s === f.status) ?? 'error'
      void this.finish(live, ex, ex.forcedStatus ?? reported, typeof f.execution_count === 'number' ? f.execution_count : undefined)
      return
    }
    const event = frameToEvent(f, this.deps.llmModelFor?.(ex.id) ?? this.config.REPLCAST_MODEL)
    if (!event) return
    // The REPL caps output, but its channel lives in the same process as the user's code: the host
    // counts too, so no sandbox can fill Redis. The budget leaves the REPL's own caps room to act first.
    const size = JSON.stringify(event).length + FRAME_OVERHEAD_BYTES
    const text = event.type === 'stdout' || event.type === 'stderr'
    const budget = text ? 2 * live.outputBytes : IMAGES_PER_EXECUTION * this.config.MAX_IMAGE_BYTES * BASE64_GROWTH
    const used = text ? ex.loggedBytes.text : ex.loggedBytes.rich
    if (used + size > budget) { ex.droppedBytes += size; return }
    if (text) ex.loggedBytes.text += size
    else ex.loggedBytes.rich += size
    ex.chain = ex.chain.then(() => this.append(live.id, ex.id, event)).catch((err) => this.log.error({ err }, 'event append failed'))
  }

  /** Interrupt, then SIGKILL after the grace period if the REPL does not end the execution. */
  interruptRunning(live: LiveSession, ex: PendingExecution, reason: 'interrupted' | 'timeout'): void {
    if (ex.ended) return
    if (reason === 'timeout') ex.forcedStatus = 'timeout'
    live.client.interrupt()
    ex.timers.push(unrefTimer(this.config.INTERRUPT_GRACE_MS, () => {
      if (ex.ended) return
      this.log.warn({ sessionId: live.id, executionId: ex.id }, 'REPL ignored the interrupt; killing the sandbox')
      ex.forcedStatus = reason === 'timeout' ? 'timeout' : 'killed'
      void this.deps.driver.kill(live.containerId)
    }))
  }

  private async finish(live: LiveSession, ex: PendingExecution, status: DoneStatusT, executionCount?: number): Promise<void> {
    if (ex.ended) return
    ex.ended = true
    for (const t of ex.timers) clearTimeout(t)
    live.client.forget(ex.id)
    if (ex.droppedBytes > 0) {
      const limit = { type: 'limit', what: 'event_bytes', dropped_bytes: ex.droppedBytes }
      ex.chain = ex.chain.then(() => this.append(live.id, ex.id, limit)).catch((err) => this.log.error({ err }, 'event append failed'))
    }
    const end = Date.now()
    const started = ex.startedAt || end
    const duration = end - started
    await ex.chain
    if (live.running === ex) live.running = null
    else live.queue = live.queue.filter((q) => q !== ex)
    const alive = live.attached && !live.stopping
    const done = { type: 'done', status, ...(executionCount !== undefined ? { execution_count: executionCount } : {}), duration_ms: duration }
    const fields = { status, ended_at: end, duration_ms: duration, execution_count: executionCount ?? null, ...(ex.startedAt ? {} : { started_at: null }) }
    const session = alive ? { fields: { status: live.queue.length ? 'busy' as const : 'ready' as const, last_active_at: end, ...(executionCount !== undefined ? { execution_count: executionCount } : {}) }, deadlineMs: end + live.idleTimeoutS * 1000 } : null
    try {
      await this.store.recordEnd(live.id, ex.id, live.tenant, done, fields, session)
      this.deps.feed.notify(live.id, ex.id)
    } catch (err) {
      this.log.error({ err, sessionId: live.id, executionId: ex.id }, 'could not record the end of an execution')
    }
    this.deps.metrics.executions.inc({ status })
    this.deps.metrics.executionSeconds.observe(duration / 1000)
    this.deps.onExecutionEnd?.(ex.id)
    ex.onDone?.(status)
    if (alive) this.runNext(live)
  }

  /** Ends the running and queued executions with `status` (the sandbox is going away). */
  async endAll(live: LiveSession, status: DoneStatusT): Promise<void> {
    const all = [...(live.running ? [live.running] : []), ...live.queue]
    await Promise.all(all.map((ex) => this.finish(live, ex, ex.forcedStatus ?? status)))
  }

  async append(sid: string, eid: string, event: EventPayload): Promise<string> {
    const id = await this.store.appendEvent(sid, eid, event)
    this.deps.feed.notify(sid, eid)
    return id
  }
}
