// This instance's Docker engine among the others on one Redis: its id (read at start), its free
// capacity reported on a timer, where a new session goes (the live engine with the most free
// memory, whichever instance received the request), and whether a session's sandbox is reachable
// from here (only an instance on its engine can attach to it).
import type { Logger } from 'pino'
import type { Config } from '../../config.js'
import { AppError } from '../../errors.js'
import type { SandboxDriver } from '../../sandbox/driver.js'
import type { EngineStore } from '../../store/engine-store.js'
import type { LeaseStore } from '../../store/lease-store.js'
import type { SessionRecord } from '../../store/records.js'
import type { SessionStore } from '../../store/session-store.js'
import type { HostCapacity } from './host-capacity.js'
import type { RecordedExecutions } from '../runner/index.js'

const MIB = 1024 * 1024

/** Where a session's sandbox can be reached: here, through live instances on its engine, or nowhere any more. */
export type Whereabouts = { here: true } | { here: false; engine: string; instances: string[] }

/**
 * The session's sandbox is on another engine that has live instances: one of them must serve it
 * (the HTTP layer forwards the request to `instances`; 503 with Retry-After until it can).
 */
export class SessionOnOtherEngine extends AppError {
  constructor(
    readonly engine: string,
    readonly instances: string[],
  ) {
    super('unavailable', "the session's sandbox runs on another Docker engine, served by another API instance; retry shortly", {
      headers: { 'retry-after': '1' },
    })
  }
}

export interface EnginesDeps {
  config: Config
  driver: Pick<SandboxDriver, 'engineId'>
  capacity: Pick<HostCapacity, 'figures'>
  store: EngineStore
  log: Logger
  records: Pick<SessionStore, 'getSession'>
}

export class Engines {
  private id = ''
  private reported = false

  constructor(private readonly deps: EnginesDeps) {}

  /** Reads the engine's id and reports it: from here on sessions made here record it. */
  async start(): Promise<void> {
    this.id = await this.deps.driver.engineId()
    await this.report()
  }

  /** This instance's engine id ('' before start). */
  local(): string {
    return this.id
  }

  /** Reports the engine's free capacity and this instance as one of its instances, for LEASE_TTL_MS. */
  async report(): Promise<void> {
    if (!this.id) return
    const f = await this.deps.capacity.figures()
    await this.deps.store.report({ id: this.id, ...f, updatedAt: Date.now() }, this.deps.config.instanceId, this.deps.config.LEASE_TTL_MS)
    this.reported = true
  }

  /** Shutdown: this instance is no longer one of its engine's. */
  async close(): Promise<void> {
    if (this.reported) await this.deps.store.withdraw(this.id, this.deps.config.instanceId)
    this.reported = false
  }

  /** The live instances on `engine`, this one excluded. */
  async instancesOn(engine: string): Promise<string[]> {
    return (await this.deps.store.instances(engine)).filter((i) => i !== this.deps.config.instanceId)
  }

  /**
   * For a request about session `sid` that no live holder answers: a live instance on the session's
   * engine when that is not this one's (any of them; null: this engine, or none left there).
   */
  async instanceFor(sid: string): Promise<string | null> {
    const rec = await this.deps.records.getSession(sid)
    const w = rec ? await this.whereIs(rec) : { here: true as const }
    if (w.here || w.instances.length === 0) return null
    return w.instances[Math.floor(Math.random() * w.instances.length)] ?? null
  }

  /**
   * Where a new session goes: null for this engine, else the engine with the most
   * free memory and its live instances. Ties stay here (no hop); so does a request when Redis
   * cannot say (the local capacity check still stands).
   */
  async place(): Promise<{ engine: string; instances: string[] } | null> {
    if (!this.id) return null
    try {
      const engines = await this.deps.store.live(this.id)
      // Alone (the usual case): no other engine to compare with, so no Docker call on the create's path.
      if (engines.length === 0) return null
      const here = await this.deps.capacity.figures()
      const others = engines.filter((e) => e.freeBytes > here.freeBytes).sort((a, b) => b.freeBytes - a.freeBytes)
      for (const e of others) {
        const instances = await this.instancesOn(e.id)
        if (instances.length === 0) continue
        this.deps.log.debug(
          { engine: e.id, freeMib: Math.round(e.freeBytes / MIB), hereFreeMib: Math.round(here.freeBytes / MIB) },
          'placing a session on another engine',
        )
        return { engine: e.id, instances }
      }
    } catch (err) {
      this.deps.log.warn({ err }, 'could not compare engines; placing the session here')
    }
    return null
  }

  /**
   * The other live engines with an API instance and at least `bytes` free by their last report,
   * ordered by id (a fork spreads its copies over them and this one, in turn).
   */
  async othersWithRoom(bytes: number): Promise<string[]> {
    if (!this.id) return []
    const out: string[] = []
    for (const e of (await this.deps.store.live(this.id)).sort((a, b) => (a.id < b.id ? -1 : 1)))
      if (e.freeBytes >= bytes && (await this.instancesOn(e.id)).length) out.push(e.id)
    return out
  }

  /** Throws unless the session's sandbox is on this engine: SessionOnOtherEngine while its engine has live instances, else session_dead. */
  async mustBeHere(rec: Pick<SessionRecord, 'engine'>): Promise<void> {
    const w = await this.whereIs(rec)
    if (w.here) return
    if (w.instances.length) throw new SessionOnOtherEngine(w.engine, w.instances)
    throw new AppError('session_dead', strandedWhy(w.engine))
  }

  /** Whether the session's sandbox is on this engine (or on an unrecorded one, from before engines were recorded). */
  async whereIs(rec: Pick<SessionRecord, 'engine'>): Promise<Whereabouts> {
    if (!rec.engine || !this.id || rec.engine === this.id) return { here: true }
    return { here: false, engine: rec.engine, instances: await this.instancesOn(rec.engine) }
  }
}

/**
 * No API instance is left on the session's engine: nothing can reach its sandbox, so the session
 * ends (dead, saying why) and so do its executions, each with one `done`. The caller holds the lease
 * (one instance ends it); the sandbox is removed by its engine's sweep when an instance runs there again.
 */
export async function endStranded(
  deps: {
    stores: { sessions: Pick<SessionStore, 'updateSession'>; leases: Pick<LeaseStore, 'releaseLease'> }
    recorded: Pick<RecordedExecutions, 'unfinished' | 'endOrphaned'>
    instanceId: string
    log: Logger
  },
  rec: SessionRecord,
): Promise<never> {
  const why = strandedWhy(rec.engine)
  try {
    for (const ex of await deps.recorded.unfinished(rec)) await deps.recorded.endOrphaned(rec, ex, 'killed', why)
    await deps.stores.sessions.updateSession(rec.id, { status: 'dead', status_detail: why })
    deps.log.warn({ sessionId: rec.id, engine: rec.engine }, 'no API instance left on the session engine: session ended')
  } finally {
    await deps.stores.leases.releaseLease(rec.id, deps.instanceId).catch(() => undefined)
  }
  throw new AppError('session_dead', why)
}

/** What a session whose engine has no API instance left says about itself. */
function strandedWhy(engine: string | undefined): string {
  return `the session's sandbox runs on Docker engine ${engine ?? '?'}, and no API instance on that engine is left to reach it`
}
