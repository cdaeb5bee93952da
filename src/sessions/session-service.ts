// The session service: the one module that combines Docker sandboxes, REPL clients and the
// Redis store. Executions run on the instance that holds the session's lease; their events
// go to Redis, from where any instance serves them.
import type { Logger } from 'pino'
import type { Config } from '../config.js'
import { AppError } from '../errors.js'
import type { CreateSessionBodyT, DoneStatusT, ExecutionT, SessionT } from '../schemas.js'
import type { DockerSandboxDriver, SandboxHandle } from '../sandbox/docker-driver.js'
import { parseFrame, ReplClient } from '../repl/repl-client.js'
import type { LlmRequestFrame, ReplFrame } from '../repl/protocol.js'
import type { ExecutionRecord, LoggedEvent, RedisStore, SessionRecord } from '../store/redis-store.js'
import { newId } from './ids.js'
import { checkCeilings } from '../tenants.js'
import { resolveSessionLimits } from './session-limits.js'
import { toExecution, toSession } from './views.js'
import { newPendingExecution, unrefTimer, type EventPayload, type PendingExecution } from './execution.js'
import { ExecutionRunner, type LiveSession, type RunnerDeps } from './execution-runner.js'



/** The runner's dependencies, plus the agent module's hooks. */
export interface SessionServiceDeps extends RunnerDeps {
  /** Answers llm_query/llm_batch calls made by sandbox code (the agent module); absent = they fail with a clear error. */
  onLlmRequest?: (ctx: LlmRequestContext, frame: LlmRequestFrame) => void
  /** An interrupt found no execution running (e.g. an LLM turn between two steps): true when it ended something. */
  onIdleInterrupt?: (sessionId: string) => boolean
  /** Whether this instance is running an LLM turn (which writes its own done). */
  isTurnRunning?: (turnId: string) => boolean
}

export interface LlmRequestContext {
  sessionId: string
  tenant: string
  client: ReplClient
  append: (execId: string, event: EventPayload) => Promise<string>
  /** The execution the session is running now (sandbox frames name one, but could lie). */
  runningExecId: () => string | undefined
}

export class SessionService {
  private readonly live = new Map<string, LiveSession>()
  private readonly runner: ExecutionRunner
  private readonly adopting = new Map<string, Promise<LiveSession>>()
  private readonly timers: NodeJS.Timeout[] = []
  private runtimes: Set<string> | null = null
  private closing = false
  private readonly config: Config
  private readonly store: RedisStore
  private readonly driver: DockerSandboxDriver
  private readonly log: Logger

  constructor(private readonly deps: SessionServiceDeps) {
    this.config = deps.config
    this.store = deps.store
    this.driver = deps.driver
    this.log = deps.log
    this.runner = new ExecutionRunner(deps)
  }

  /** This instance lets go of a live session (its REPL client is closed by the caller). */
  private detach(live: LiveSession): void {
    live.attached = false
    // Timers of executions this instance no longer drives must not fire (a re-adoption re-arms them).
    for (const ex of [...(live.running ? [live.running] : []), ...live.queue]) ex.timers.forEach(clearTimeout)
    if (this.live.get(live.id) === live) this.live.delete(live.id)
  }

  // ---------- lifecycle ----------

  /** Removes leftover containers, re-adopts this instance's sessions, starts the reaper and lease renewal. */
  async start(): Promise<void> {
    await this.removeOrphans()
    for (const sid of await this.store.instanceSessionIds(this.config.instanceId)) {
      const rec = await this.store.getSession(sid)
      if (!rec) { await this.store.removeInstanceSession(this.config.instanceId, sid); continue }
      if (rec.status === 'dead') continue
      await this.ensureLocal(rec).catch((err) => this.log.warn({ err, sessionId: sid }, 'could not re-adopt session'))
    }
    this.every(this.config.REAPER_INTERVAL_MS, () => this.reapDue())
    this.every(Math.floor(this.config.LEASE_TTL_MS / 3), () => this.renewLeases())
  }

  /** Keeps this instance's leases; a session whose lease another instance took is let go (not stopped). */
  private async renewLeases(): Promise<void> {
    const holders = await this.store.renewLeases([...this.live.keys()], this.config.instanceId, this.config.LEASE_TTL_MS)
    for (const [sid, holder] of holders) {
      const live = this.live.get(sid)
      if (!live || holder === this.config.instanceId) continue
      this.log.warn({ sessionId: sid, holder }, 'lost the session lease to another instance; detaching')
      live.stopping = true
      live.client.close()
      this.detach(live)
    }
  }

  /** Detaches from every sandbox (they stay for re-adoption) and stops timers. Running executions keep running in their sandboxes. */
  async close(): Promise<void> {
    this.closing = true
    for (const t of this.timers) clearInterval(t)
    for (const s of this.live.values()) { s.stopping = true; s.attached = false; s.client.close() }
    this.live.clear()
  }

  private every(ms: number, fn: () => Promise<unknown>): void {
    let busy = false
    const t = setInterval(() => {
      if (busy || this.closing) return
      busy = true
      fn().catch((err) => this.log.warn({ err }, 'background task failed')).finally(() => { busy = false })
    }, ms)
    t.unref()
    this.timers.push(t)
  }

  // ---------- sessions ----------

  async create(tenant: string, body: CreateSessionBodyT): Promise<SessionT> {
    if (!tenant) throw new AppError('unauthorized', 'no tenant for this request')
    const c = this.config
    const { limits, idle, maxSessions } = resolveSessionLimits(c, tenant, body)
    const runtime = body.runtime ?? c.SANDBOX_RUNTIME
    if (!(await this.availableRuntimes()).has(runtime)) throw new AppError('runtime_unavailable', `runtime ${runtime} is not registered with the Docker engine`)
    const now = Date.now()
    const rec: SessionRecord = {
      id: newId('ses'), tenant, status: 'starting', created_at: now, last_active_at: now, idle_timeout_s: idle,
      runtime, limits, metadata: body.metadata ?? {}, env: body.env ?? {}, container_id: '', execution_count: 0,
    }
    // The deadline covers start-up too, so a crash mid-create still gets the session reaped.
    if (!(await this.store.createSession(rec, now + idle * 1000 + c.SANDBOX_START_TIMEOUT_MS, maxSessions))) {
      throw new AppError('quota_exceeded', `tenant already has ${maxSessions} sessions (the maximum); delete one first`, { headers: { 'retry-after': '10' } })
    }
    const log = this.log.child({ sessionId: rec.id, tenant })
    const t0 = performance.now()
    let handle: SandboxHandle | null = null
    try {
      handle = await this.driver.create({
        sessionId: rec.id, tenant, instance: c.instanceId, deployment: c.REPLCAST_DEPLOYMENT, image: c.SANDBOX_IMAGE,
        runtime, user: c.SANDBOX_USER, memoryMb: limits.memory_mb, cpus: limits.cpus, pids: limits.pids,
        workspaceMb: limits.workspace_mb, tmpMb: c.SANDBOX_TMP_MB, nofile: c.SANDBOX_NOFILE,
        maxStreamBytes: limits.output_bytes, maxImageBytes: c.MAX_IMAGE_BYTES, env: rec.env,
      })
      rec.container_id = handle.containerId
      await this.store.updateSession(rec.id, { container_id: handle.containerId })
      const live = this.attachLive(rec, handle, false)
      await live.client.ready
      await this.store.acquireLease(rec.id, c.instanceId, c.LEASE_TTL_MS)
      await this.store.addInstanceSession(c.instanceId, rec.id)
      rec.status = 'ready'
      if (!(await this.store.updateSession(rec.id, { status: 'ready' }))) throw new AppError('session_not_found', 'the session was deleted while starting')
      await this.store.setDeadline(rec.id, Date.now() + idle * 1000)
      this.deps.metrics.sessionCreateSeconds.observe((performance.now() - t0) / 1000)
      log.info({ containerId: handle.containerId, runtime }, 'session created')
      return toSession(rec)
    } catch (err) {
      log.error({ err }, 'session start failed')
      const live = this.live.get(rec.id)
      if (live) { live.stopping = true; live.client.close(); this.detach(live) }
      if (handle) await this.driver.remove(handle.containerId).catch(() => undefined)
      await this.store.deleteSession(rec)
      if (err instanceof AppError) throw err
      throw new AppError('sandbox_failed', 'the sandbox could not be started', { cause: err })
    }
  }

  async get(tenant: string, id: string): Promise<SessionT> {
    return toSession(await this.record(tenant, id))
  }

  /** The tenant's sessions ordered by id; `cursor` is the last id of the previous page. */
  async list(tenant: string, limit: number, cursor?: string): Promise<{ sessions: SessionT[]; next_cursor: string | null }> {
    if (!tenant) throw new AppError('unauthorized', 'no tenant for this request')
    const ids = (await this.store.tenantSessionIds(tenant)).filter((id) => !cursor || id > cursor)
    const page = ids.slice(0, limit)
    const recs = await Promise.all(page.map((id) => this.store.getSession(id)))
    return {
      sessions: recs.filter((r): r is SessionRecord => r !== null).map(toSession),
      next_cursor: ids.length > limit ? page[page.length - 1] ?? null : null,
    }
  }

  async delete(tenant: string, id: string): Promise<void> {
    const rec = await this.record(tenant, id)
    await this.destroy(rec, 'killed')
    this.log.info({ sessionId: id, tenant }, 'session deleted')
  }

  /** Ends every execution, removes the container and the session's state. Safe to call twice. */
  private async destroy(rec: SessionRecord, status: DoneStatusT): Promise<void> {
    const live = this.live.get(rec.id)
    if (live) {
      live.stopping = true
      await this.runner.endAll(live, status)
      live.client.close()
      this.detach(live)
    } else if (!(await this.store.leaseHolder(rec.id))) {
      // No instance drives its executions (one that did would end them when the container goes).
      for (const ex of await this.unfinishedExecutions(rec)) await this.endOrphaned(rec, ex, status, 'the session was deleted')
    }
    if (rec.container_id) await this.driver.remove(rec.container_id)
    await this.store.deleteSession(rec)
    await this.store.removeInstanceSession(this.config.instanceId, rec.id)
  }

  async restart(tenant: string, id: string): Promise<SessionT> {
    const rec = await this.record(tenant, id)
    if (!rec.container_id) throw new AppError('session_dead', 'the session has no sandbox')
    // Requests that need the session meanwhile wait for the restarted one instead of adopting the old.
    const restarted = this.restartLive(rec)
    this.adopting.set(id, restarted)
    try {
      await restarted
    } finally {
      if (this.adopting.get(id) === restarted) this.adopting.delete(id)
    }
    this.log.info({ sessionId: id, tenant }, 'session restarted')
    return this.get(tenant, id)
  }

  private async restartLive(rec: SessionRecord): Promise<LiveSession> {
    const id = rec.id
    const old = this.live.get(id)
    if (old) {
      old.stopping = true
      await this.runner.endAll(old, 'killed')
      old.client.close()
      this.detach(old)
    } else {
      await this.claimLease(rec)
    }
    await this.store.updateSession(id, { status: 'starting' })
    let live: LiveSession | null = null
    try {
      const handle = await this.driver.restart(rec.container_id, id)
      live = this.attachLive(rec, handle, false)
      await live.client.ready
    } catch (err) {
      if (live) { live.stopping = true; live.client.close(); this.detach(live) }
      await this.markDead(id)
      throw new AppError('sandbox_failed', 'the sandbox could not be restarted', { cause: err })
    }
    await this.store.addInstanceSession(this.config.instanceId, id)
    await this.store.updateSession(id, { status: 'ready', execution_count: 0, last_active_at: Date.now() })
    await this.store.setDeadline(id, Date.now() + rec.idle_timeout_s * 1000)
    return live
  }

  // ---------- executions ----------

  /** Queues code for the session; resolves with the execution id once its first event is logged. */
  async submit(tenant: string, sid: string, code: string, timeoutS?: number): Promise<string> {
    const tl = this.config.tenantLimits.for(tenant)
    checkCeilings(tl, { timeout_s: timeoutS })
    const timeout = timeoutS ?? Math.min(this.config.EXEC_TIMEOUT_S, tl.max_exec_timeout_s)
    const rec = await this.record(tenant, sid)
    const live = await this.usable(rec)
    const ex = newPendingExecution(newId('exe'), code, timeout * 1000)
    await this.enqueue(live, ex)
    return ex.id
  }

  /** Queues an execution object driven by the caller (the agent's streamed code). */
  enqueue(live: LiveSession, ex: PendingExecution): Promise<void> { return this.runner.enqueue(live, ex) }

  /** Appends an event to an execution's log and wakes its readers. */
  append(sid: string, eid: string, event: EventPayload): Promise<string> { return this.runner.append(sid, eid, event) }

  async interrupt(tenant: string, sid: string): Promise<void> {
    const rec = await this.record(tenant, sid)
    const live = this.live.get(sid) ?? (rec.status === 'dead' ? null : await this.ensureLocal(rec))
    const ex = live?.running
    if (!live || !ex) {
      if (this.deps.onIdleInterrupt?.(sid)) return
      throw new AppError('nothing_running', 'no execution is running in this session')
    }
    this.runner.interruptRunning(live, ex, 'interrupted')
  }

  async getExecution(tenant: string, sid: string, eid: string): Promise<ExecutionT> {
    const rec = await this.execRecord(tenant, sid, eid)
    const events: LoggedEvent[] = []
    for (let page = await this.store.readEvents(sid, eid, ''); page.length; page = await this.store.readEvents(sid, eid, page[page.length - 1]!.id)) events.push(...page)
    return toExecution(rec, events)
  }

  /** Checks access and returns the record; 404 when it is missing or another tenant's. */
  async execRecord(tenant: string, sid: string, eid: string): Promise<ExecutionRecord> {
    await this.record(tenant, sid)
    const rec = await this.store.getExecution(sid, eid)
    if (!rec || rec.tenant !== tenant) throw new AppError('execution_not_found', `no execution ${eid} in session ${sid}`)
    return rec
  }

  /** Streams an execution's events after `afterId` until its `done` (see EventFeed.follow). */
  follow(sid: string, eid: string, afterId: string, onEvent: (e: LoggedEvent) => Promise<void> | void, signal: AbortSignal): Promise<boolean> {
    return this.deps.feed.follow(sid, eid, afterId, onEvent, signal, this.live.has(sid))
  }

  /** How many events follow `afterId` (0 when it is the last). */
  async eventsAfter(sid: string, eid: string, afterId: string): Promise<number> {
    return (await this.store.readEvents(sid, eid, afterId, 1)).length
  }

  /** Waits for an execution's end (for JSON clients) and returns it whole. */
  async waitExecution(tenant: string, sid: string, eid: string, signal: AbortSignal): Promise<ExecutionT> {
    await this.follow(sid, eid, '', () => undefined, signal)
    return this.getExecution(tenant, sid, eid)
  }

  // ---------- local attachment, adoption, death ----------

  private attachLive(rec: SessionRecord, handle: SandboxHandle, adopted: boolean): LiveSession {
    const client = new ReplClient(handle.transport, this.log.child({ sessionId: rec.id }), { readyTimeoutMs: this.config.SANDBOX_START_TIMEOUT_MS, expectReady: !adopted })
    const live: LiveSession = { id: rec.id, tenant: rec.tenant, containerId: handle.containerId, client, queue: [], running: null, reserved: 0, attached: true, stopping: false, idleTimeoutS: rec.idle_timeout_s, outputBytes: rec.limits.output_bytes ?? this.config.MAX_STREAM_BYTES }
    this.live.set(rec.id, live)
    const onLlm = this.deps.onLlmRequest
    if (onLlm) client.onLlmRequest((f) => onLlm({ sessionId: rec.id, tenant: rec.tenant, client, append: (eid, e) => this.append(rec.id, eid, e), runningExecId: () => live.running?.id }, f))
    const onGone = async () => {
      if (live.stopping || this.closing || !live.attached) return
      let exit: Awaited<ReturnType<DockerSandboxDriver['inspectExit']>>
      try {
        exit = await this.driver.inspectExit(handle.containerId)
      } catch (err) {
        // The engine cannot say: let go; the next request for the session adopts it again.
        this.log.warn({ err, sessionId: rec.id }, 'attach stream closed and the engine is unreachable; detaching')
        this.detach(live)
        return
      }
      if (exit.running) {
        // Only the attach stream broke: attach again to the still-running REPL.
        this.log.warn({ sessionId: rec.id }, 'attach stream closed; re-attaching')
        this.detach(live)
        await this.ensureLocal(rec)
        return
      }
      live.stopping = true
      const status: DoneStatusT = exit.oomKilled ? 'oom' : 'killed'
      this.log.warn({ sessionId: rec.id, exitCode: exit.exitCode, oomKilled: exit.oomKilled }, 'sandbox exited')
      const why = exit.oomKilled
        ? { ename: 'SandboxOutOfMemory', evalue: `the sandbox ran out of memory (limits.memory_mb) and was killed` }
        : { ename: 'SandboxDied', evalue: `the sandbox stopped unexpectedly (exit code ${exit.exitCode ?? 'unknown'}); restart the session or create a new one` }
      const killedByUs = { ename: 'SandboxKilled', evalue: `the code did not stop within ${this.config.INTERRUPT_GRACE_MS} ms of the interrupt, so the sandbox was killed; restart the session to continue` }
      for (const ex of [...(live.running ? [live.running] : []), ...live.queue]) {
        const e = ex.forcedStatus && live.running === ex ? killedByUs : why
        ex.chain = ex.chain.then(() => this.append(rec.id, ex.id, { type: 'error', ...e, traceback: [] })).catch((err) => this.log.error({ err }, 'event append failed'))
      }
      await this.runner.endAll(live, status)
      this.detach(live)
      await this.markDead(rec.id)
    }
    client.onClose(() => { onGone().catch((err) => this.log.error({ err, sessionId: rec.id }, 'handling a closed sandbox channel failed')) })
    // A backup for the attach stream's end: only a real exit closes the channel.
    void handle.exited.then((e) => { if (e.exitCode !== null && !live.stopping) live.client.close() })
    return live
  }

  private async markDead(sid: string): Promise<void> {
    await this.store.updateSession(sid, { status: 'dead' })
    await this.store.removeInstanceSession(this.config.instanceId, sid)
  }

  /** A session the caller can run code in: attached here, alive. */
  private async usable(rec: SessionRecord): Promise<LiveSession> {
    if (rec.status === 'dead') throw new AppError('session_dead', 'the session\'s sandbox has died; restart it or create a new session')
    return this.live.get(rec.id) ?? this.ensureLocal(rec)
  }

  /** Attaches this instance to a session whose lease is free or already ours (after a restart). */
  private ensureLocal(rec: SessionRecord): Promise<LiveSession> {
    const existing = this.live.get(rec.id)
    if (existing) return Promise.resolve(existing)
    let p = this.adopting.get(rec.id)
    if (!p) {
      p = this.adoptRunning(rec).finally(() => this.adopting.delete(rec.id))
      this.adopting.set(rec.id, p)
    }
    return p
  }

  private async adoptRunning(rec: SessionRecord): Promise<LiveSession> {
    await this.claimLease(rec)
    const state = rec.container_id ? await this.driver.inspectExit(rec.container_id) : { running: false, oomKilled: false, exitCode: null }
    const all = await this.unfinishedExecutions(rec)
    // An LLM turn lives only in the process that ran it: if that is not this one, nobody will end it.
    for (const turn of all.filter((x) => x.kind === 'turn' && !this.deps.isTurnRunning?.(x.id))) {
      await this.endOrphaned(rec, turn, 'killed', 'the API instance running this LLM turn stopped; send the message again')
    }
    const unfinished = all.filter((x) => x.kind !== 'turn')
    if (!state.running) {
      await this.markDead(rec.id)
      for (const ex of unfinished) await this.endOrphaned(rec, ex, state.oomKilled ? 'oom' : 'killed', 'the sandbox stopped while no API instance was attached')
      throw new AppError('session_dead', 'the session\'s sandbox is gone; restart it or create a new session')
    }
    const handle = await this.driver.adopt(rec.container_id, rec.id)
    const live = this.attachLive(rec, handle, true)
    try {
      const running = unfinished.find((ex) => ex.status === 'running')
      // Frames of the running execution that arrive now wait until those written while detached are replayed.
      const early: ReplFrame[] = []
      if (running) live.client.track(running.id, (f) => early.push(f))
      await this.store.addInstanceSession(this.config.instanceId, rec.id)
      if (running) await this.resumeRunning(rec, live, running, early)
      for (const ex of unfinished.filter((x) => x.status === 'queued').reverse()) {
        const pending = newPendingExecution(ex.id, ex.code ?? '', ex.timeout_ms ?? this.config.EXEC_TIMEOUT_S * 1000, ex.kind === 'stream' ? 'stream' : 'execute')
        if (pending.kind === 'stream') { await this.endOrphaned(rec, ex, 'killed', 'the API instance that was streaming this code stopped'); continue }
        live.queue.push(pending)
      }
      if (!running) {
        await this.store.updateSession(rec.id, { status: live.queue.length ? 'busy' : 'ready' })
        this.runner.runNext(live)
      }
      this.log.info({ sessionId: rec.id, resumed: running?.id, requeued: live.queue.length }, 'session adopted')
      return live
    } catch (err) {
      live.stopping = true
      live.client.close()
      this.detach(live)
      await this.store.releaseLease(rec.id, this.config.instanceId).catch(() => undefined)
      if (err instanceof AppError) throw err
      throw new AppError('sandbox_failed', 'the session\'s sandbox could not be re-attached', { cause: err })
    }
  }

  /**
   * Picks up an execution that kept running while no instance was attached: the frames it wrote
   * meanwhile are read back from the container's log (deduplicated by the REPL's seq), then live
   * frames continue. A streamed (LLM) step is interrupted: the turn that fed it is gone.
   */
  private async resumeRunning(rec: SessionRecord, live: LiveSession, rx: ExecutionRecord, early: ReplFrame[]): Promise<void> {
    const started = rx.started_at ?? rx.created_at
    const ex = newPendingExecution(rx.id, rx.code ?? '', rx.timeout_ms ?? this.config.EXEC_TIMEOUT_S * 1000, rx.kind === 'stream' ? 'stream' : 'execute')
    ex.startedAt = started
    ex.announcedRunning = true
    live.running = ex
    let lastSeq = await this.store.lastSeq(rec.id, rx.id)
    const replay = (f: ReplFrame) => {
      if (typeof f.seq === 'number') { if (f.seq <= lastSeq) return; lastSeq = f.seq }
      this.runner.onFrame(live, ex, f)
    }
    const logged = await this.driver.readStdoutLog(rec.container_id, started).catch((err) => { this.log.warn({ err }, 'could not read the sandbox log'); return Buffer.alloc(0) })
    for (const line of logged.toString('utf8').split('\n')) {
      const f = parseFrame(line)
      if (f && f.exec_id === rx.id) replay(f)
    }
    for (const f of early) replay(f)
    if (!ex.ended) {
      live.client.track(rx.id, (f) => replay(f))
      if (ex.kind === 'stream') {
        // A step of an LLM turn whose instance is gone: nobody streams the rest, so it stops here.
        this.runner.interruptRunning(live, ex, 'interrupted')
      } else {
        const left = Math.max(0, started + ex.timeoutMs - Date.now())
        ex.timers.push(unrefTimer(left, () => this.runner.interruptRunning(live, ex, 'timeout')))
      }
    }
  }

  private async claimLease(rec: SessionRecord): Promise<void> {
    const holder = await this.store.acquireLease(rec.id, this.config.instanceId, this.config.LEASE_TTL_MS)
    if (holder !== this.config.instanceId) throw new AppError('session_elsewhere', `the session is attached to API instance ${holder}; route requests for it there`)
  }

  private async unfinishedExecutions(rec: SessionRecord): Promise<ExecutionRecord[]> {
    const eids = await this.store.redis.lrange(this.store.keys.sessionExecutions(rec.id), 0, this.config.EXEC_QUEUE_DEPTH + 1)
    const recs = await Promise.all(eids.map((eid) => this.store.getExecution(rec.id, eid)))
    return recs.filter((x): x is ExecutionRecord => x !== null && (x.status === 'queued' || x.status === 'running'))
  }

  /** Ends an execution no instance can continue: an error event saying why, then its one `done`. */
  private async endOrphaned(rec: SessionRecord, ex: ExecutionRecord, status: DoneStatusT, why: string): Promise<void> {
    const end = Date.now()
    await this.append(rec.id, ex.id, { type: 'error', ename: 'SandboxError', evalue: why, traceback: [] })
    await this.append(rec.id, ex.id, { type: 'done', status, duration_ms: end - (ex.started_at ?? ex.created_at) })
    await this.store.updateExecution(rec.id, ex.id, { status, ended_at: end })
    await this.store.expireExecution(rec.id, ex.id)
    await this.store.releaseRunningSlot(rec.tenant, ex.id)
  }

  // ---------- reaping and orphans ----------

  private async reapDue(): Promise<void> {
    for (const sid of await this.store.claimDue(Date.now())) {
      try {
        await this.reapOne(sid)
      } catch (err) {
        // Claimed but not handled: back in the set, to be tried again.
        this.log.warn({ err, sessionId: sid }, 'reaping failed; will retry')
        await this.store.restoreDeadline(sid, Date.now() + 5000).catch(() => undefined)
      }
    }
  }

  private async reapOne(sid: string): Promise<void> {
    const rec = await this.store.getSession(sid)
    if (!rec) return
    const now = Date.now()
    const deadline = rec.last_active_at + rec.idle_timeout_s * 1000
    if (rec.status === 'busy') {
      // Past a running execution's own time limit. If no instance holds the session, its instance
      // is gone: adopt it here, which resumes the execution and enforces its timeout.
      if (!this.live.has(sid) && !(await this.store.leaseHolder(sid))) {
        this.log.warn({ sessionId: sid }, 'busy session without an instance; adopting it')
        await this.ensureLocal(rec).catch((err) => this.log.warn({ err, sessionId: sid }, 'could not adopt an orphaned busy session'))
      }
      await this.store.restoreDeadline(sid, now + rec.idle_timeout_s * 1000)
      return
    }
    if (deadline > now) { await this.store.restoreDeadline(sid, deadline); return }
    this.log.info({ sessionId: sid, tenant: rec.tenant }, 'reaping idle session')
    await this.destroy(rec, 'killed')
    this.deps.metrics.sessionsReaped.inc()
  }

  private async removeOrphans(): Promise<void> {
    const known = await this.store.allSessionIds()
    for (const c of await this.driver.listManaged(this.config.REPLCAST_DEPLOYMENT)) {
      if (known.has(c.sessionId)) continue
      this.log.warn({ containerId: c.id, sessionId: c.sessionId }, 'removing a sandbox unknown to Redis')
      await this.driver.remove(c.id)
    }
  }

  // ---------- helpers ----------

  private async record(tenant: string, id: string): Promise<SessionRecord> {
    if (!tenant) throw new AppError('unauthorized', 'no tenant for this request')
    const rec = await this.store.getSession(id)
    if (!rec || rec.tenant !== tenant) throw new AppError('session_not_found', `no session ${id}`)
    return rec
  }

  async liveSession(tenant: string, id: string): Promise<LiveSession> {
    return this.usable(await this.record(tenant, id))
  }

  private async availableRuntimes(): Promise<Set<string>> {
    if (!this.runtimes) this.runtimes = await this.driver.runtimes()
    return this.runtimes
  }

  localSessionCount(): number { return this.live.size }
}

export type { LiveSession }
