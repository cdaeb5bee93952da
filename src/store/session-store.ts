// Sessions in Redis: their records, each tenant's set of them, and their idle deadlines (which the
// reaper claims when they come due). Deleting a session deletes its executions' and processes' logs with it.
import type { Redis } from 'ioredis'
import type { EventBytes } from './event-bytes.js'
import type { RedisKeys } from './keys.js'
import { fromHash, toHash, type SessionRecord } from './records.js'
import { runScript } from './scripts.js'
import { CLAIM_DUE, CREATE_SESSION, HIBERNATED, RESERVE_HIBERNATION, SETTLE_CLAIM, UPDATE_SESSION, WAKE_PLACE } from './session-scripts.js'

export class SessionStore {
  constructor(
    private readonly redis: Redis,
    private readonly keys: RedisKeys,
    /** Where a deleted session's logs give their bytes back to the tenant. */
    private readonly eventBytes: EventBytes,
  ) {}

  /** Creates the session unless the tenant already has `maxSessions`; returns false then. */
  async createSession(rec: SessionRecord, deadlineMs: number, maxSessions: number): Promise<boolean> {
    const fields = Object.entries(toHash(rec)).flat()
    return (
      (await runScript(
        this.redis,
        CREATE_SESSION,
        this.keys.session(rec.id),
        this.keys.tenantSessions(rec.tenant),
        this.keys.deadlines(),
        maxSessions,
        deadlineMs,
        rec.id,
        ...fields,
      )) === 1
    )
  }

  async getSession(id: string): Promise<SessionRecord | null> {
    const h = await this.redis.hgetall(this.keys.session(id))
    return h.id ? fromHash<SessionRecord>(h) : null
  }

  /** Updates fields of a session that still exists; returns false when it is gone. */
  async updateSession(id: string, fields: Partial<SessionRecord>): Promise<boolean> {
    const hash = Object.entries(toHash(fields)).flat()
    if (!hash.length) return (await this.redis.exists(this.keys.session(id))) === 1
    return (await runScript(this.redis, UPDATE_SESSION, this.keys.session(id), ...hash)) === 1
  }

  async deleteSession(rec: Pick<SessionRecord, 'id' | 'tenant'>): Promise<void> {
    const [listed, older, pids] = await Promise.all([
      this.redis.lrange(this.keys.sessionExecutions(rec.id), 0, -1),
      this.redis.zrange(this.keys.sessionOlder(rec.id), '0', '-1'),
      this.redis.zrange(this.keys.sessionProcesses(rec.id), '0', '-1'),
    ])
    // A background process's output is a log like an execution's (keys.ts): dropped the same way.
    const eids = [...listed, ...older, ...pids]
    const m = this.redis
      .multi()
      .del(
        this.keys.session(rec.id),
        this.keys.sessionExecutions(rec.id),
        this.keys.sessionUnfinished(rec.id),
        this.keys.sessionOlder(rec.id),
        this.keys.history(rec.id),
        this.keys.lease(rec.id),
        this.keys.leaseTerm(rec.id),
        this.keys.sessionProcesses(rec.id),
        this.keys.sessionRunningProcesses(rec.id),
        ...pids.map((pid) => this.keys.process(rec.id, pid)),
      )
      .srem(this.keys.tenantSessions(rec.tenant), rec.id)
      .srem(this.keys.tenantHibernated(rec.tenant), rec.id)
      .zrem(this.keys.deadlines(), rec.id)
    // Its executions can no longer be read (reads go through the session): their logs go with it.
    this.eventBytes.dropIn(m, rec.tenant, rec.id, eids)
    await m.exec()
  }

  /** The tenant's sessions, hibernated ones included, sorted. */
  async tenantSessionIds(tenant: string): Promise<string[]> {
    return (await this.redis.sunion(this.keys.tenantSessions(tenant), this.keys.tenantHibernated(tenant))).sort()
  }

  // ---- hibernation (sessions/hibernation.ts) ----
  /** Takes one of the tenant's `max` places for hibernated sessions for the session; false when none is left. */
  async reserveHibernation(rec: Pick<SessionRecord, 'id' | 'tenant'>, max: number): Promise<boolean> {
    const k = this.keys
    return (
      (await runScript(this.redis, RESERVE_HIBERNATION, k.session(rec.id), k.tenantSessions(rec.tenant), k.tenantHibernated(rec.tenant), rec.id, max)) === 1
    )
  }

  /** Gives back a place reserveHibernation took (the hibernation failed). */
  async cancelHibernation(rec: Pick<SessionRecord, 'id' | 'tenant'>): Promise<void> {
    await this.redis.srem(this.keys.tenantHibernated(rec.tenant), rec.id)
  }

  /** Records the session hibernated with `fields`, due for deletion at `deadlineMs`; false when it was deleted meanwhile. */
  async hibernated(rec: Pick<SessionRecord, 'id' | 'tenant'>, fields: Partial<SessionRecord>, deadlineMs: number): Promise<boolean> {
    const k = this.keys
    const hash = Object.entries(toHash(fields)).flat()
    const keys = [k.session(rec.id), k.tenantSessions(rec.tenant), k.tenantHibernated(rec.tenant), k.deadlines()]
    return (await runScript(this.redis, HIBERNATED, ...keys, rec.id, deadlineMs, ...hash)) === 1
  }

  /** Moves a hibernated session among the tenant's live ones (`max` of them at most) before its wake: 'ok', 'not_hibernated' or 'full'. */
  async wakePlace(rec: Pick<SessionRecord, 'id' | 'tenant'>, max: number): Promise<'ok' | 'not_hibernated' | 'full'> {
    const k = this.keys
    const r = await runScript(this.redis, WAKE_PLACE, k.session(rec.id), k.tenantSessions(rec.tenant), k.tenantHibernated(rec.tenant), rec.id, max)
    return r === 1 ? 'ok' : r === -1 ? 'full' : 'not_hibernated'
  }

  async allSessionIds(): Promise<Set<string>> {
    const ids = new Set<string>()
    let cursor = '0'
    do {
      const [next, keys] = await this.redis.scan(cursor, 'MATCH', this.keys.session('*'), 'COUNT', 500)
      cursor = next
      for (const k of keys) {
        const m = /\{([^}]+)\}:session$/.exec(k)
        if (m?.[1]) ids.add(m[1])
      }
    } while (cursor !== '0')
    return ids
  }

  // ---- idle deadlines ----
  /** Moves an existing session's deadline. */
  async setDeadline(id: string, deadlineMs: number): Promise<void> {
    await this.redis.zadd(this.keys.deadlines(), 'XX', deadlineMs, id)
  }

  /** Claims up to `max` sessions due at `nowMs` until `nowMs + claimMs`; settle each claim when its work is done. */
  async claimDue(nowMs: number, claimMs: number, max = 100): Promise<string[]> {
    return (await runScript(this.redis, CLAIM_DUE, this.keys.deadlines(), nowMs, max, nowMs + claimMs)) as string[]
  }

  /** Replaces the claim (made with `claimedUntil`) by the session's next deadline; false when something moved it meanwhile. */
  async settleClaim(id: string, claimedUntil: number, deadlineMs: number): Promise<boolean> {
    return (await runScript(this.redis, SETTLE_CLAIM, this.keys.deadlines(), id, String(claimedUntil), deadlineMs)) === 1
  }
}
