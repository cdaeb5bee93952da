// Background clean-up: idle sessions past their deadline are deleted (whichever instance claims
// them first), busy sessions whose instance is gone are adopted, and containers that Redis no
// longer knows are removed.
import type { Logger } from 'pino'
import type { Config } from '../config.js'
import type { DockerSandboxDriver } from '../sandbox/docker-driver.js'
import type { RedisStore } from '../store/redis-store.js'
import type { Adoption } from './adoption.js'
import type { Metrics } from './metrics.js'
import type { SessionRegistry } from './registry.js'
import type { SessionService } from './session-service.js'

/** How long a claimed session whose reaping failed waits before it is tried again. */
const RETRY_MS = 5000

export interface ReaperDeps {
  config: Config
  store: RedisStore
  driver: DockerSandboxDriver
  log: Logger
  metrics: Metrics
  registry: SessionRegistry
  sessions: SessionService
  adoption: Adoption
}

export class Reaper {
  constructor(private readonly deps: ReaperDeps) {}

  /** Handles every session whose deadline has passed. */
  async reapDue(): Promise<void> {
    const { store, log } = this.deps
    for (const sid of await store.claimDue(Date.now())) {
      try {
        await this.reapOne(sid)
      } catch (err) {
        // Claimed but not handled: back in the set, to be tried again.
        log.warn({ err, sessionId: sid }, 'reaping failed; will retry')
        await store.restoreDeadline(sid, Date.now() + RETRY_MS).catch(() => undefined)
      }
    }
  }

  /** Removes this deployment's containers whose session Redis does not know. */
  async removeOrphans(): Promise<void> {
    const { store, driver, config, log } = this.deps
    const known = await store.allSessionIds()
    for (const c of await driver.listManaged(config.REPLCAST_DEPLOYMENT)) {
      if (known.has(c.sessionId)) continue
      log.warn({ containerId: c.id, sessionId: c.sessionId }, 'removing a sandbox unknown to Redis')
      await driver.remove(c.id)
    }
  }

  private async reapOne(sid: string): Promise<void> {
    const { store, registry, adoption, sessions, log } = this.deps
    const rec = await store.getSession(sid)
    if (!rec) return
    const now = Date.now()
    const deadline = rec.last_active_at + rec.idle_timeout_s * 1000
    if (rec.status === 'busy') {
      // Past a running execution's own time limit. If no instance holds the session, its instance
      // is gone: adopt it here, which resumes the execution and enforces its timeout.
      if (!registry.has(sid) && !(await store.leaseHolder(sid))) {
        log.warn({ sessionId: sid }, 'busy session without an instance; adopting it')
        await adoption.ensureLocal(rec).catch((err: unknown) => log.warn({ err, sessionId: sid }, 'could not adopt an orphaned busy session'))
      }
      await store.restoreDeadline(sid, now + rec.idle_timeout_s * 1000)
      return
    }
    if (deadline > now) {
      await store.restoreDeadline(sid, deadline)
      return
    }
    log.info({ sessionId: sid, tenant: rec.tenant }, 'reaping idle session')
    await sessions.destroy(rec, 'killed')
    this.deps.metrics.sessionsReaped.inc()
  }
}
