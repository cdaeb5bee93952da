// Hibernating a session: its sandbox (memory, workspace files, processes) checkpointed to disk by
// the runtime, its container removed, so it holds no RAM and no process until something needs it
// (wake.ts brings it back). Runs on the instance that holds the session, while requests for it wait.
import type { Logger } from 'pino'
import type { Config } from '../config.js'
import { AppError } from '../errors.js'
import type { Metrics } from '../metrics.js'
import { CheckpointError, type SandboxDriver } from '../sandbox/driver.js'
import type { SessionRecord } from '../store/records.js'
import type { Stores } from '../store/stores.js'
import type { Adoption } from './adoption.js'
import type { DrivenLogs, ExecutionRunner, LiveSession } from './runner/index.js'
import type { CheckpointStore, Engines, SandboxSource, SealedCheckpoint } from './supply/index.js'
import type { SessionRegistry } from './registry.js'
import { roundAll } from './wake.js'

/** How long a hibernation waits for the sandbox's terminals and file transfers to end once it let the session go. */
const EXECS_END_MS = 5000
const EXECS_POLL_MS = 50

export interface HibernationDeps {
  config: Config
  stores: Pick<Stores, 'sessions' | 'leases'>
  driver: SandboxDriver
  log: Logger
  metrics: Metrics
  registry: SessionRegistry
  runner: ExecutionRunner
  driven: DrivenLogs
  adoption: Adoption
  checkpoints: CheckpointStore
  engines: Pick<Engines, 'mustBeHere' | 'local'>
  sandboxes: Pick<SandboxSource, 'reserve'>
}

export class Hibernation {
  constructor(private readonly deps: HibernationDeps) {}

  /**
   * Hibernates the session and returns its record as it then is (a hibernated one as it was).
   * Throws session_dead, not_supported, session_busy, quota_exceeded, checkpoint_space,
   * sandbox_failed (the checkpoint failed; the session runs on as it was), session_moving.
   */
  async hibernate(rec: SessionRecord, keep?: KeepCheckpoint): Promise<SessionRecord> {
    const { driver, adoption, stores, config } = this.deps
    if (rec.status === 'hibernated') return rec
    if (rec.status === 'dead') throw new AppError('session_dead', rec.status_detail || "the session's sandbox has died; there is nothing to hibernate")
    const refusal = await driver.checkpointRefusal(rec.runtime)
    if (refusal) throw new AppError('not_supported', refusal)
    await this.deps.engines.mustBeHere(rec)
    const live = await adoption.ensureLocal(rec)
    this.refuseBusy(live)
    await this.needSpace(rec)
    const max = config.tenantLimits.for(rec.tenant).max_hibernated_sessions
    if (!(await stores.sessions.reserveHibernation(rec, max)))
      throw new AppError('quota_exceeded', `tenant already has ${max} hibernated sessions (the maximum); delete one first`, {
        headers: { 'retry-after': '10' },
      })
    let running = false
    try {
      return await adoption.gated(rec.id, async () => {
        try {
          return await this.checkpoint(rec, live, keep)
        } catch (err) {
          running = err instanceof StillRunning
          throw err instanceof StillRunning ? err.error : err
        }
      })
    } catch (err) {
      await stores.sessions.cancelHibernation(rec).catch(() => undefined)
      // A failed checkpoint leaves the sandbox running as it was: attach to it again now.
      if (running)
        await adoption
          .ensureLocal(rec)
          .catch((e: unknown) => this.deps.log.warn({ err: e, sessionId: rec.id }, 'could not attach again after a failed checkpoint'))
      throw err
    }
  }

  /**
   * A restart of a hibernated session: a fresh sandbox (as a new session's) in its place, and its
   * checkpoint dropped. Throws quota_exceeded (no room in max_sessions), capacity, sandbox_failed, session_moving.
   */
  async restartFresh(rec: SessionRecord): Promise<SessionRecord> {
    const { adoption, stores, config, checkpoints } = this.deps
    const term = await adoption.claimLease(rec)
    const max = config.tenantLimits.for(rec.tenant).max_sessions
    const place = await stores.sessions.wakePlace(rec, max)
    if (place !== 'ok') {
      await stores.leases.releaseLease(rec.id, config.instanceId)
      if (place === 'full') throw new AppError('quota_exceeded', `a restart needs room among the tenant's ${max} live sessions (the maximum)`)
      throw new AppError('session_moving', 'the session was woken meanwhile; try again', { headers: { 'retry-after': '1' } })
    }
    await adoption.holding(rec.id, this.startFresh(rec, term))
    await checkpoints.remove(rec.id)
    return (await stores.sessions.getSession(rec.id)) ?? rec
  }

  private async startFresh(rec: SessionRecord, term: string): Promise<LiveSession> {
    const { adoption, stores, config, driver } = this.deps
    const ticket = await this.deps.sandboxes.reserve(rec)
    let live: LiveSession | null = null
    try {
      const handle = await ticket.start()
      live = adoption.attach({ ...rec, container_id: handle.containerId }, handle, ticket.pooled, term)
      await Promise.all([ticket.confirm(), ticket.ready(live.client.ready)])
      await ticket.bind()
    } catch (err) {
      if (live) this.deps.registry.release(live)
      if (live) await driver.remove(live.containerId).catch(() => undefined)
      await adoption.markDead(rec.id, 'the restart could not start a new sandbox; restart it again')
      throw err instanceof AppError ? err : new AppError('sandbox_failed', 'the sandbox could not be restarted', { cause: err })
    } finally {
      ticket.release()
    }
    const now = Date.now()
    await stores.leases.addInstanceSession(config.instanceId, rec.id)
    await stores.sessions.updateSession(rec.id, {
      status: 'ready',
      status_detail: '',
      container_id: live.containerId,
      execution_count: 0,
      last_active_at: now,
      hibernated_at: null,
      checkpoint_digest: '',
      checkpoint_bytes: null,
      // Its engine may have had no instance left: the new sandbox is on this one's.
      ...(this.deps.engines.local() ? { engine: this.deps.engines.local() } : {}),
    })
    await stores.sessions.setDeadline(rec.id, now + rec.idle_timeout_s * 1000)
    return live
  }

  /**
   * runsc stops the sandbox when its checkpoint cannot be written, so a full disk is refused before:
   * the image (compressed) is never larger than the memory the sandbox may use, tmpfs files included.
   */
  private async needSpace(rec: SessionRecord): Promise<void> {
    const need = rec.limits.memory_mb * 1024 * 1024
    const free = await this.deps.checkpoints.freeBytes()
    if (free < need)
      throw new AppError(
        'checkpoint_space',
        `hibernating this session needs ${rec.limits.memory_mb} MiB free for its checkpoint (its memory_mb) and ${Math.floor(free / 1048576)} MiB are; it runs on as it was`,
      )
  }

  /** Waits (a bounded time) until nothing runs in the sandbox beside its REPL; false when something still does. */
  private async execsEnded(containerId: string): Promise<boolean> {
    const until = Date.now() + EXECS_END_MS
    for (;;) {
      if ((await this.deps.driver.runningExecs(containerId)) === 0) return true
      if (Date.now() >= until) return false
      await new Promise((resolve) => setTimeout(resolve, EXECS_POLL_MS))
    }
  }

  private refuseBusy(live: LiveSession): void {
    if (this.deps.runner.isBusy(live) || this.deps.driven.drivesSession(live.id))
      throw new AppError('session_busy', 'the session is running code; hibernate it when its executions have ended (or interrupt them)')
  }

  private async checkpoint(rec: SessionRecord, live: LiveSession, keep?: KeepCheckpoint): Promise<SessionRecord> {
    const { driver, stores, checkpoints, registry, config, log } = this.deps
    // Checked again now that requests wait: nothing may have started since.
    this.refuseBusy(live)
    const containerId = live.containerId
    const t0 = performance.now()
    live.state = 'stopping'
    // Its terminals end with the release (as with a delete or a restart); the checkpoint waits until
    // their shells, and a file transfer under way, are gone.
    registry.release(live)
    if (!(await this.execsEnded(containerId))) throw new StillRunning(busyExecs())
    await stores.sessions.updateSession(rec.id, { hibernating_at: Date.now() })
    const part = await checkpoints.partDir(rec.id)
    try {
      await driver.checkpoint(containerId, part)
    } catch (err) {
      await stores.sessions.updateSession(rec.id, { hibernating_at: null })
      const state = await driver.inspectExit(containerId).catch(() => null)
      const error =
        err instanceof CheckpointError && err.noSpace
          ? new AppError('checkpoint_space', `there is no disk space for the session's checkpoint (${err.message})`, { cause: err })
          : new AppError('sandbox_failed', `the session could not be checkpointed (${err instanceof Error ? err.message : String(err)})`, { cause: err })
      log.error({ err, sessionId: rec.id }, 'checkpoint failed')
      if (state?.running) throw new StillRunning(error)
      // runsc ends the sandbox when it cannot write the image (a disk that filled meanwhile): the state is gone, and the session says so.
      await this.deps.adoption.markDead(rec.id, `the sandbox stopped during a checkpoint that failed (${error.message}); its state was lost`)
      throw error
    }
    const written = performance.now()
    const sealed = await checkpoints.seal(part, rec.id).catch(async (err: unknown) => {
      await this.deps.adoption.markDead(rec.id, 'its checkpoint could not be kept; its state was lost')
      throw err
    })
    const sealedAt = performance.now()
    const now = Date.now()
    const ttl = rec.hibernated_ttl_s ?? config.HIBERNATED_TTL_S
    const fields: Partial<SessionRecord> = {
      status: 'hibernated',
      hibernated_at: now,
      checkpoint_digest: sealed.digest,
      checkpoint_bytes: sealed.bytes,
      container_id: '',
      hibernating_at: null,
    }
    const kept = await stores.sessions.hibernated(rec, fields, now + ttl * 1000)
    // A snapshot or a fork copies the checkpoint while the lease is held and requests wait: no wake can take it meanwhile.
    if (kept && keep) await keep(checkpoints.dir(rec.id), sealed)
    await driver.remove(containerId)
    const removed = performance.now()
    await Promise.all([stores.leases.releaseLease(rec.id, config.instanceId), stores.leases.removeInstanceSession(config.instanceId, rec.id)])
    if (!kept) {
      await checkpoints.remove(rec.id)
      throw new AppError('session_not_found', `session ${rec.id} was deleted while it was being hibernated`)
    }
    const ms = { checkpoint: written - t0, seal: sealedAt - written, remove: removed - sealedAt, total: performance.now() - t0 }
    this.deps.metrics.hibernateSeconds.observe(ms.total / 1000)
    log.info({ sessionId: rec.id, bytes: sealed.bytes, ms: roundAll(ms) }, 'session hibernated')
    return { ...rec, ...fields }
  }
}

/** Copies a checkpoint just written and sealed (snapshots.ts); it never throws (a failure is the caller's to report). */
export type KeepCheckpoint = (dir: string, sealed: SealedCheckpoint) => Promise<void>

function busyExecs(): AppError {
  return new AppError('session_busy', 'a terminal or a file transfer is open in the session; hibernate it once they have ended')
}

/** A checkpoint failed and the sandbox still runs: the caller attaches to it again once requests may. */
class StillRunning extends Error {
  constructor(readonly error: AppError) {
    super(error.message)
  }
}
