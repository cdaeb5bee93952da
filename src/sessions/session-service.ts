// Sessions' lifecycle: create (a new sandbox and REPL), read, list, restart, hibernate and wake
// (hibernation.ts, wake.ts), delete. A session runs code on the instance that holds its lease;
// Executions (executions.ts) is the way in.
import type { Logger } from 'pino'
import type { Config } from '../config.js'
import { AppError } from '../errors.js'
import type { CreateSessionBodyT, DoneStatusT, SessionT } from '../schemas.js'
import type { SandboxDriver, SandboxHandle } from '../sandbox/driver.js'
import type { SessionRecord } from '../store/records.js'
import type { Stores } from '../store/stores.js'
import type { Adoption } from './adoption.js'
import { type CheckpointStore, type Engines, type SandboxSource, resolveSessionLimits } from './supply/index.js'
import type { ExecutionRunner, LiveSession, RecordedExecutions } from './runner/index.js'
import type { ProcessRunner } from './processes/index.js'
import { newId } from './ids.js'
import type { Metrics } from '../metrics.js'
import type { SessionRegistry } from './registry.js'
import { toSession } from './views.js'
import { DEFAULT_TEMPLATE } from '../templates.js'
import type { Hibernation, KeepCheckpoint } from './hibernation.js'

export interface SessionServiceDeps {
  config: Config
  stores: Pick<Stores, 'sessions' | 'leases'>
  driver: SandboxDriver
  log: Logger
  metrics: Metrics
  registry: SessionRegistry
  runner: ExecutionRunner
  adoption: Adoption
  recorded: RecordedExecutions
  sandboxes: SandboxSource
  engines: Pick<Engines, 'local' | 'whereIs' | 'mustBeHere'>
  processes: Pick<ProcessRunner, 'endRecorded'>
  hibernation: Hibernation
  checkpoints: CheckpointStore
}

export class SessionService {
  private runtimes: Set<string> | null = null
  /** Each session's latest restart or deletion here: each waits for the one before it (see inTurn). */
  private readonly restarts = new Map<string, Promise<unknown>>()

  constructor(private readonly deps: SessionServiceDeps) {}

  /** Throws unauthorized, limit_exceeded, runtime_unavailable, unknown_template, quota_exceeded, capacity, sandbox_failed, template_unusable. */
  async create(tenant: string, body: CreateSessionBodyT): Promise<SessionT> {
    if (!tenant) throw new AppError('unauthorized', 'no tenant for this request')
    const { config: c, stores, driver, adoption, registry } = this.deps
    const { limits, idle, maxSessions, hibernatedTtl } = resolveSessionLimits(c, tenant, body)
    const runtime = body.runtime ?? c.SANDBOX_RUNTIME
    if (!(await this.availableRuntimes()).has(runtime)) throw new AppError('runtime_unavailable', `runtime ${runtime} is not registered with the Docker engine`)
    // Asked for, hibernation must be possible; by default a session that cannot hibernate is deleted.
    const refusal = body.idle_action === 'hibernate' || c.IDLE_ACTION === 'hibernate' ? await driver.checkpointRefusal(runtime) : null
    if (refusal && body.idle_action === 'hibernate') throw new AppError('not_supported', `idle_action "hibernate": ${refusal}`)
    const idleAction = refusal ? 'delete' : (body.idle_action ?? c.IDLE_ACTION)
    const now = Date.now()
    const rec: SessionRecord = {
      id: newId('ses'),
      tenant,
      status: 'starting',
      created_at: now,
      last_active_at: now,
      idle_timeout_s: idle,
      idle_action: idleAction,
      hibernated_ttl_s: hibernatedTtl,
      runtime,
      limits,
      metadata: body.metadata ?? {},
      env: body.env ?? {},
      container_id: '',
      execution_count: 0,
      template: body.template ?? DEFAULT_TEMPLATE,
      ...(this.deps.engines.local() ? { engine: this.deps.engines.local() } : {}),
    }
    // A request the warm pool matches takes a pooled sandbox; otherwise a host whose memory is
    // promised already refuses (503 capacity) before anything is written.
    const place = await this.deps.sandboxes.reserve(rec)
    // Held here before any instance can see it: the lease and this instance's set are written first,
    // in the record's round trip, so a request for the new session reaches this instance and waits
    // for the create (Adoption.creating) instead of adopting it half-made.
    const ended = adoption.creating(rec.id)
    const [lease, , created] = await Promise.all([
      stores.leases.acquireLease(rec.id, c.instanceId, c.LEASE_TTL_MS),
      stores.leases.addInstanceSession(c.instanceId, rec.id),
      // The deadline covers start-up too, so a crash mid-create still gets the session reaped.
      stores.sessions.createSession(rec, now + idle * 1000 + c.SANDBOX_START_TIMEOUT_MS, maxSessions),
    ]).catch((err: unknown) => {
      place.release()
      ended(null)
      throw err
    })
    if (!created) {
      place.release()
      await Promise.all([stores.leases.releaseLease(rec.id, c.instanceId), stores.leases.removeInstanceSession(c.instanceId, rec.id)]).finally(() =>
        ended(null),
      )
      throw new AppError('quota_exceeded', `tenant already has ${maxSessions} sessions (the maximum); delete one first`, { headers: { 'retry-after': '10' } })
    }
    const log = this.deps.log.child({ sessionId: rec.id, tenant })
    const t0 = performance.now()
    let handle: SandboxHandle | null = null
    let made: LiveSession | null = null
    try {
      handle = await place.start()
      rec.container_id = handle.containerId
      // A pooled sandbox's REPL said ready before it was taken: the session's client expects no other.
      const live = adoption.attach(rec, handle, place.pooled, lease.term)
      // While its REPL starts: the engine is counted again (a refusal ends the session below), and a
      // cold sandbox's id is recorded, so the reaper finds it after a crash meanwhile.
      await Promise.all([
        place.confirm(),
        place.pooled || stores.sessions.updateSession(rec.id, { container_id: handle.containerId }),
        place.ready(live.client.ready),
      ])
      rec.status = 'ready'
      // One round trip, in this order (one connection): the pooled sandbox's binding, the record, the deadline.
      const [, ready] = await Promise.all([
        place.bind(),
        stores.sessions.updateSession(rec.id, { container_id: handle.containerId, status: 'ready' }),
        stores.sessions.setDeadline(rec.id, Date.now() + idle * 1000),
      ])
      if (!ready) throw new AppError('session_not_found', 'the session was deleted while starting')
      made = live
      this.deps.metrics.sessionCreateSeconds.observe((performance.now() - t0) / 1000)
      log.info({ containerId: handle.containerId, runtime }, 'session created')
      return toSession(rec)
    } catch (err) {
      log.error({ err }, 'session start failed')
      const live = registry.get(rec.id)
      if (live) registry.release(live)
      if (handle) await driver.remove(handle.containerId).catch(() => undefined)
      await stores.sessions.deleteSession(rec)
      await stores.leases.removeInstanceSession(c.instanceId, rec.id)
      if (err instanceof AppError) throw err
      throw new AppError('sandbox_failed', 'the sandbox could not be started', { cause: err })
    } finally {
      place.release()
      // Requests that waited for the create go on (a failed one: session_not_found).
      ended(made)
    }
  }

  async get(tenant: string, id: string): Promise<SessionT> {
    return toSession(await this.record(tenant, id))
  }

  /** The tenant's sessions ordered by id; `cursor` is the last id of the previous page. */
  async list(tenant: string, limit: number, cursor?: string): Promise<{ sessions: SessionT[]; next_cursor: string | null }> {
    if (!tenant) throw new AppError('unauthorized', 'no tenant for this request')
    const { stores } = this.deps
    const ids = (await stores.sessions.tenantSessionIds(tenant)).filter((id) => !cursor || id > cursor)
    const page = ids.slice(0, limit)
    const recs = await Promise.all(page.map((id) => stores.sessions.getSession(id)))
    return {
      sessions: recs.filter((r): r is SessionRecord => r !== null).map(toSession),
      next_cursor: ids.length > limit ? (page[page.length - 1] ?? null) : null,
    }
  }

  async delete(tenant: string, id: string): Promise<void> {
    await this.destroy(await this.record(tenant, id), 'killed')
    this.deps.log.info({ sessionId: id, tenant }, 'session deleted')
  }

  /** Ends every execution, removes the container and the session's state, after a restart in progress. Safe to call twice. */
  async destroy(rec: SessionRecord, status: DoneStatusT): Promise<void> {
    await this.inTurn(rec.id, async () => {
      const removed = this.destroyNow(rec, status)
      // Requests for the session meanwhile wait for the removal and find no session, instead of
      // adopting the sandbox being removed (and running code in it while its records are deleted).
      const gone = removed.then(() => Promise.reject(new AppError('session_not_found', `session ${rec.id} was deleted`)))
      const held = this.deps.adoption.holding(rec.id, gone).catch(() => undefined)
      await removed
      await held
    })
  }

  private async destroyNow(rec: SessionRecord, status: DoneStatusT): Promise<void> {
    const { registry, runner, stores, recorded, driver, config } = this.deps
    // A sandbox on another engine is removed there; one whose engine has no instance left stays for that engine's sweep.
    const where = await this.deps.engines.whereIs(rec)
    if (!where.here && where.instances.length) await this.deps.engines.mustBeHere(rec)
    const live = registry.get(rec.id)
    if (live) {
      live.state = 'stopping'
      await runner.endAll(live, status)
      registry.release(live)
    } else if (!(await stores.leases.leaseHolder(rec.id))) {
      // No instance drives its executions (one that did would end them when the container goes).
      for (const ex of await recorded.unfinished(rec)) await recorded.endOrphaned(rec, ex, status, 'the session was deleted')
    }
    // Its processes end with it: a client following one's output gets its `exit` before the output goes.
    await this.deps.processes.endRecorded(rec.id)
    if (rec.container_id && where.here) await driver.remove(rec.container_id)
    await this.deps.checkpoints.remove(rec.id)
    await stores.sessions.deleteSession(rec)
    await stores.leases.removeInstanceSession(config.instanceId, rec.id)
  }

  /**
   * A fresh interpreter and workspace in the same container. Concurrent restarts of one session are
   * serialized: each waits for the one before it, then restarts again (only the lease holder
   * restarts, so one instance's order is the order). Throws session_dead, session_moving, sandbox_failed.
   */
  async restart(tenant: string, id: string): Promise<SessionT> {
    await this.record(tenant, id)
    return this.inTurn(id, () => this.restartOnce(tenant, id))
  }

  /**
   * Runs `work` after the session's restarts and deletions before it (`restarts` holds the latest):
   * a restart never meets a container being removed, a delete never one being restarted, and a
   * restart queued behind a delete finds no session (404).
   */
  private async inTurn<T>(id: string, work: () => Promise<T>): Promise<T> {
    const before = this.restarts.get(id) ?? Promise.resolve()
    const mine = before.catch(() => undefined).then(work)
    this.restarts.set(id, mine)
    try {
      return await mine
    } finally {
      if (this.restarts.get(id) === mine) this.restarts.delete(id)
    }
  }

  /** Hibernates the session (see Hibernation.hibernate), after restarts and deletions before it. */
  async hibernate(tenant: string, id: string, keep?: KeepCheckpoint): Promise<SessionT> {
    await this.record(tenant, id)
    return this.inTurn(id, async () => toSession(await this.deps.hibernation.hibernate(await this.record(tenant, id), keep)))
  }

  /** Hibernates a session at its idle deadline (the reaper), as hibernate() does; one gone meanwhile is left. */
  async hibernateIdle(rec: SessionRecord): Promise<void> {
    await this.inTurn(rec.id, async () => {
      // Used since the reaper read it: its deadline moved, and the reaper meets it again then.
      const now = await this.deps.stores.sessions.getSession(rec.id)
      if (now && now.last_active_at + now.idle_timeout_s * 1000 <= Date.now()) await this.deps.hibernation.hibernate(now)
    })
  }

  /** Wakes a hibernated session now, ahead of its use (a live one is only attached). Throws like usable. */
  async wake(tenant: string, id: string): Promise<SessionT> {
    await this.usable(await this.record(tenant, id))
    return this.get(tenant, id)
  }

  private async restartOnce(tenant: string, id: string): Promise<SessionT> {
    // Read again: a restart before this one may have changed it (or the session may be gone).
    const rec = await this.record(tenant, id)
    // A fresh interpreter needs no checkpoint: a hibernated session gets a new sandbox, and its checkpoint goes.
    if (rec.status === 'hibernated') return toSession(await this.deps.hibernation.restartFresh(rec))
    if (!rec.container_id) throw new AppError('session_dead', 'the session has no sandbox')
    await this.deps.engines.mustBeHere(rec)
    await this.deps.adoption.holding(id, this.restartLive(rec))
    this.deps.log.info({ sessionId: id, tenant }, 'session restarted')
    return this.get(tenant, id)
  }

  private async restartLive(rec: SessionRecord): Promise<LiveSession> {
    const { registry, runner, adoption, stores, driver, config } = this.deps
    const id = rec.id
    // Only the holder restarts: this instance may have lost the session while it was paused (then
    // another instance holds it, and the request is refused session_moving, to be passed on there).
    const term = await adoption.claimLease(rec)
    const old = registry.get(id)
    if (old) {
      old.state = 'stopping'
      await runner.endAll(old, 'killed')
      registry.release(old)
    }
    // The restart ends the old sandbox's processes (exit_code null): the fresh one runs none.
    await this.deps.processes.endRecorded(id)
    await stores.sessions.updateSession(id, { status: 'starting' })
    let live: LiveSession | null = null
    try {
      const handle = await driver.restart(rec.container_id, id)
      live = adoption.attach(rec, handle, false, term)
      await live.client.ready
    } catch (err) {
      if (live) registry.release(live)
      await adoption.markDead(id)
      throw new AppError('sandbox_failed', 'the sandbox could not be restarted', { cause: err })
    }
    await stores.leases.addInstanceSession(config.instanceId, id)
    await stores.sessions.updateSession(id, { status: 'ready', status_detail: '', execution_count: 0, last_active_at: Date.now() })
    await stores.sessions.setDeadline(id, Date.now() + rec.idle_timeout_s * 1000)
    return live
  }

  /** The session's record; 404 session_not_found when it is missing or another tenant's. */
  async record(tenant: string, id: string): Promise<SessionRecord> {
    if (!tenant) throw new AppError('unauthorized', 'no tenant for this request')
    const rec = await this.deps.stores.sessions.getSession(id)
    if (!rec || rec.tenant !== tenant) throw new AppError('session_not_found', `no session ${id}`)
    return rec
  }

  /** Resolves once no hibernation of the session runs here: a file transfer started meanwhile would spoil its checkpoint. */
  settled(id: string): Promise<void> {
    return this.deps.adoption.settled(id)
  }

  /** A session the caller can run code in: attached here (adopting it if its lease is free), alive. */
  async usable(rec: SessionRecord): Promise<LiveSession> {
    if (rec.status === 'dead') throw new AppError('session_dead', rec.status_detail || "the session's sandbox has died; restart it or create a new session")
    // ensureLocal, not the registry first: a session being created here is in the registry before its REPL is ready.
    return this.deps.adoption.ensureLocal(rec)
  }

  private async availableRuntimes(): Promise<Set<string>> {
    this.runtimes ??= await this.deps.driver.runtimes()
    return this.runtimes
  }
}
