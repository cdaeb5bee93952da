// Background clean-up: idle sessions past their deadline are deleted, or hibernated when they asked
// for it (whichever instance claims them first, under a claim that lapses if that instance dies;
// a hibernation runs on the session's holder), hibernated ones are deleted with their checkpoint
// past their hibernated_ttl_s, busy sessions whose instance is
// gone are adopted, executions whose end was never recorded are ended, sandboxes that could not be
// killed are removed, and containers that Redis no longer knows are removed.
import type { Logger } from 'pino'
import type { Config } from '../config.js'
import { withTimeout } from '../retry.js'
import type { SandboxDriver } from '../sandbox/driver.js'
import type { SessionRecord } from '../store/records.js'
import type { Stores } from '../store/stores.js'
import type { Adoption } from './adoption.js'
import type { DrivenLogs, ExecutionRunner, LiveSession, RecordedExecutions } from './runner/index.js'
import type { Engines } from './supply/index.js'
import type { Metrics } from '../metrics.js'
import { AppError } from '../errors.js'
import type { SessionRegistry } from './registry.js'
import type { SessionService } from './session-service.js'

/** How long a claimed session whose reaping failed waits before it is tried again. */
const RETRY_MS = 5000
/** Sessions reaped at once: one that hangs holds up only its own place. */
const PARALLEL = 8

export interface ReaperDeps {
  config: Config
  stores: Pick<Stores, 'sessions' | 'leases'>
  driver: SandboxDriver
  log: Logger
  metrics: Metrics
  registry: SessionRegistry
  sessions: SessionService
  adoption: Adoption
  runner: ExecutionRunner
  recorded: RecordedExecutions
  driven: DrivenLogs
  engines: Pick<Engines, 'whereIs'>
}

export class Reaper {
  /** How long one session's reaping may take: a few Docker calls, and Redis writes retried for a while. */
  private readonly reapTimeoutMs: number
  /** How long a claim keeps other instances off a session: longer than the reaping it covers. */
  private readonly claimMs: number
  /** How far past its limit an unfinished execution must be to count as stale: its instance's own efforts to end it come first. */
  private readonly staleMs: number

  constructor(private readonly deps: ReaperDeps) {
    const c = deps.config
    this.reapTimeoutMs = 4 * c.DOCKER_TIMEOUT_MS + c.REDIS_RETRY_MS
    this.claimMs = 2 * this.reapTimeoutMs
    this.staleMs = 4 * c.DOCKER_TIMEOUT_MS + c.REDIS_RETRY_MS + c.LEASE_TTL_MS
  }

  /** Handles every session whose deadline has passed, several at once, each within its time. */
  async reapDue(): Promise<void> {
    const { stores, log } = this.deps
    const now = Date.now()
    const claimedUntil = now + this.claimMs
    const queue = await stores.sessions.claimDue(now, this.claimMs)
    const worker = async () => {
      for (let sid = queue.shift(); sid !== undefined; sid = queue.shift()) {
        try {
          await withTimeout(this.reapOne(sid, claimedUntil), this.reapTimeoutMs, 'reaping a session')
        } catch (err) {
          // Not handled: tried again soon. (Work that timed out may still be running: its claim
          // keeps others off until it lapses, and the work settles the claim itself if it ends.)
          log.warn({ err, sessionId: sid }, 'reaping failed; will retry')
          await stores.sessions.settleClaim(sid, claimedUntil, Date.now() + RETRY_MS).catch(() => undefined)
        }
      }
    }
    await Promise.all(Array.from({ length: Math.min(PARALLEL, queue.length) }, worker))
  }

  /**
   * Removes this deployment's containers whose session Redis does not know, and those of hibernated
   * sessions no instance is waking (a wake cut short by a crash: the next wake restores afresh).
   */
  async removeOrphans(): Promise<void> {
    const { stores, driver, config, log } = this.deps
    const known = await stores.sessions.allSessionIds()
    // Run at start: a lease still in this instance's name is its former life's, cut short.
    const waking = async (sid: string) => ![null, config.instanceId].includes(await stores.leases.leaseHolder(sid))
    const asleep = async (sid: string) => (await stores.sessions.getSession(sid))?.status === 'hibernated' && !(await waking(sid))
    for (const c of await driver.listManaged(config.REPLCAST_DEPLOYMENT)) {
      // Warm-pool containers carry no session label: the pool's sweep (pool-sweep.ts) decides on them.
      if (c.pooled || (known.has(c.sessionId) && !(await asleep(c.sessionId)))) continue
      log.warn({ containerId: c.id, sessionId: c.sessionId }, 'removing a sandbox unknown to Redis, or left by a wake cut short')
      await driver.remove(c.id).catch((err: unknown) => log.warn({ err, containerId: c.id }, 'could not remove a sandbox unknown to Redis'))
    }
  }

  private async reapOne(sid: string, claimedUntil: number): Promise<void> {
    const { stores, registry, adoption, sessions, driver, config, log } = this.deps
    const rec = await stores.sessions.getSession(sid)
    if (!rec) return
    const now = Date.now()
    // A session on another engine is reaped by an instance there (only they reach its sandbox), unless none is left.
    const where = await this.deps.engines.whereIs(rec)
    if (!where.here && where.instances.length) {
      await stores.sessions.settleClaim(sid, claimedUntil, now + RETRY_MS)
      return
    }
    if (rec.status === 'hibernated') return this.reapHibernated(rec, claimedUntil)
    const deadline = rec.last_active_at + rec.idle_timeout_s * 1000
    if (rec.status === 'busy') {
      // Past a running execution's own time limit. If no instance holds the session, its instance
      // is gone: adopt it here, which resumes the execution and enforces its timeout.
      const live = registry.get(sid)
      const holder = live ? config.instanceId : await stores.leases.leaseHolder(sid)
      if (!live && (!holder || holder === config.instanceId)) {
        log.warn({ sessionId: sid }, 'busy session without an instance; adopting it')
        await adoption.ensureLocal(rec).catch((err: unknown) => log.warn({ err, sessionId: sid }, 'could not adopt an orphaned busy session'))
      } else {
        await this.endStale(rec, live)
      }
      await stores.sessions.settleClaim(sid, claimedUntil, now + rec.idle_timeout_s * 1000)
      return
    }
    // Before its idle deadline only a dead session whose sandbox still runs goes: it could not be killed.
    const unkillable = deadline > now && rec.status === 'dead' && rec.container_id !== '' && (await driver.inspectExit(rec.container_id)).running
    if (deadline > now && !unkillable) {
      await stores.sessions.settleClaim(sid, claimedUntil, deadline)
      return
    }
    if (!unkillable && rec.status === 'ready' && rec.idle_action === 'hibernate' && (await this.hibernateIdle(rec, claimedUntil))) return
    log.info({ sessionId: sid, tenant: rec.tenant }, unkillable ? 'removing a sandbox that could not be killed' : 'reaping idle session')
    await sessions.destroy(rec, 'killed')
    this.deps.metrics.sessionsReaped.inc()
  }

  /** Deletes a hibernated session with its checkpoint once its hibernated_ttl_s has passed. */
  private async reapHibernated(rec: SessionRecord, claimedUntil: number): Promise<void> {
    const { stores, sessions, config, log } = this.deps
    const due = (rec.hibernated_at ?? 0) + (rec.hibernated_ttl_s ?? config.HIBERNATED_TTL_S) * 1000
    if (due > Date.now()) {
      await stores.sessions.settleClaim(rec.id, claimedUntil, due)
      return
    }
    log.info({ sessionId: rec.id, tenant: rec.tenant }, 'deleting a hibernated session past its hibernated_ttl_s')
    await sessions.destroy(rec, 'killed')
    this.deps.metrics.sessionsReaped.inc()
  }

  /**
   * Hibernates a session at its idle deadline, as POST .../hibernate does. True when that is done
   * (or left to its holder, another live instance, or the session went busy): false when it cannot
   * be hibernated (no room among the tenant's hibernated sessions, or its runtime cannot), and is
   * then deleted as any idle session. A failed checkpoint throws: it is tried again.
   */
  private async hibernateIdle(rec: SessionRecord, claimedUntil: number): Promise<boolean> {
    const { stores, registry, sessions, config, log } = this.deps
    const holder = registry.has(rec.id) ? config.instanceId : await stores.leases.leaseHolder(rec.id)
    if (holder && holder !== config.instanceId) {
      // Its holder hibernates it: due again after one reaper round, when the holder's own reaper may
      // claim it first (a longer wait would let a non-holder's claims put the idle action off again and again).
      await stores.sessions.settleClaim(rec.id, claimedUntil, Date.now() + config.REAPER_INTERVAL_MS)
      return true
    }
    try {
      await sessions.hibernateIdle(rec)
      log.info({ sessionId: rec.id, tenant: rec.tenant }, 'hibernated an idle session')
      return true
    } catch (err) {
      if (!(err instanceof AppError)) throw err
      if (err.code === 'session_busy') {
        await stores.sessions.settleClaim(rec.id, claimedUntil, Date.now() + rec.idle_timeout_s * 1000)
        return true
      }
      if (err.code !== 'quota_exceeded' && err.code !== 'not_supported') throw err
      log.warn({ sessionId: rec.id, tenant: rec.tenant, reason: err.message }, 'an idle session could not be hibernated; deleting it')
      return false
    }
  }

  /**
   * Ends the executions of a busy session whose end was never recorded, long past their limit
   * (their instance lost Redis or Docker at the time), so the session is not busy forever.
   */
  private async endStale(rec: SessionRecord, live: LiveSession | undefined): Promise<void> {
    const { recorded, runner, driven, stores, log } = this.deps
    const drivenHere = live ? (ex: { id: string }) => runner.has(live, ex.id) || driven.drives(ex.id) : null
    const stale = await recorded.stale(rec, this.staleMs, drivenHere)
    if (stale.length === 0) return
    for (const ex of stale) {
      log.warn({ sessionId: rec.id, executionId: ex.id }, 'ending an execution whose end was never recorded')
      const why = "this execution's end was never recorded (its API instance lost Redis or the Docker engine at the time, or stopped); the reaper ended it"
      await recorded.endOrphaned(rec, ex, 'killed', why)
    }
    const busy = live ? runner.isBusy(live) : (await recorded.unfinished(rec)).length > 0
    if (!busy) await stores.sessions.updateSession(rec.id, { status: 'ready', last_active_at: Date.now() })
  }
}
