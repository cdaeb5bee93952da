// Redis is the only shared state: sessions, idle deadlines, leases, executions and
// their event logs (one Redis Stream per execution; stream ids are the SSE ids).
import { randomBytes } from 'node:crypto'
import type { Redis } from 'ioredis'
import { EventBytes } from './event-bytes.js'
import { readPage } from './event-pages.js'
import { redisKeys, type RedisKeys } from './keys.js'
import { fromHash, toHash, type ExecutionRecord, type LoggedEvent, type SessionRecord } from './records.js'

export type { ExecutionRecord, LoggedEvent, SessionRecord } from './records.js'

// Claims due ids atomically with a lease: their deadline moves to the end of the claim (ARGV[3]),
// so no other instance takes them meanwhile, and one that dies mid-batch loses nothing: when the
// claim lapses they are due again. The work removes or moves them when done (SETTLE_CLAIM).
const CLAIM_DUE = `
local ids = redis.call('ZRANGE', KEYS[1], '-inf', ARGV[1], 'BYSCORE', 'LIMIT', 0, tonumber(ARGV[2]))
for _, id in ipairs(ids) do redis.call('ZADD', KEYS[1], ARGV[3], id) end
return ids`

// Ends a claim: the new deadline replaces the claim's, unless something moved it meanwhile (the
// session was used, or deleted), which then stands.
const SETTLE_CLAIM = `
if redis.call('ZSCORE', KEYS[1], ARGV[1]) == ARGV[2] then redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1]) return 1 end
return 0`

// Sets the lease when free or already ours; returns the holder.
const ACQUIRE_LEASE = `
local cur = redis.call('GET', KEYS[1])
if (not cur) or cur == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', tonumber(ARGV[2]))
  return ARGV[1]
end
return cur`

// Takes the lease when it is free, ours, or held by ARGV[2] (an instance that is gone or handed it
// over); returns the holder. Exactly one of several instances racing for it wins.
const TAKE_LEASE = `
local cur = redis.call('GET', KEYS[1])
if (not cur) or cur == ARGV[1] or cur == ARGV[2] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', tonumber(ARGV[3]))
  return ARGV[1]
end
return cur`

// Deletes the lease if it is still ARGV[1]'s.
const RELEASE_LEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`

// A tenant's executions that are queued or running: a sorted set of ids scored by the time by
// which each must have ended, so an id left behind by a crashed instance frees itself.
// Adds the id only while fewer than the cap are live; returns 1 on success. The set expires with
// its latest member, never its newest: a short execution must not take the long ones' slots with it.
const ACQUIRE_SLOT = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[4])
redis.call('PEXPIREAT', KEYS[1], math.ceil(tonumber(redis.call('ZRANGE', KEYS[1], 0, 0, 'REV', 'WITHSCORES')[2])))
return 1`

// Creates a session only while the tenant has fewer than the cap; returns 1 on success.
const CREATE_SESSION = `
if redis.call('SCARD', KEYS[2]) >= tonumber(ARGV[1]) then return 0 end
for i = 4, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('SADD', KEYS[2], ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[3])
return 1`

// Updates a live session (never a deleted or dead one) and moves its idle deadline, atomically.
const SESSION_ACTIVITY = `
local st = redis.call('HGET', KEYS[1], 'status')
if (not st) or st == 'dead' then return 0 end
for i = 3, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('ZADD', KEYS[2], ARGV[1], ARGV[2])
return 1`

export class RedisStore {
  readonly keys: RedisKeys
  /** Every event appended is counted against its tenant's max_event_bytes (`eventBytesLimit`; none without it). */
  private readonly eventBytes: EventBytes

  constructor(
    readonly redis: Redis,
    prefix: string,
    private readonly opts: { eventMaxLen: number; eventTtlS: number; eventBytesLimit?: (tenant: string) => number },
  ) {
    this.keys = redisKeys(prefix)
    const limitFor = opts.eventBytesLimit ?? (() => Number.MAX_SAFE_INTEGER)
    this.eventBytes = new EventBytes(redis, this.keys, { prefix, maxLen: opts.eventMaxLen, ttlS: opts.eventTtlS, limitFor })
  }

  // ---- sessions ----
  /** Creates the session unless the tenant already has `maxSessions`; returns false then. */
  async createSession(rec: SessionRecord, deadlineMs: number, maxSessions: number): Promise<boolean> {
    const fields = Object.entries(toHash(rec)).flat()
    return (
      (await this.redis.eval(
        CREATE_SESSION,
        3,
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
    const key = this.keys.session(id)
    const res = await this.redis.multi().exists(key).hset(key, toHash(fields)).exec()
    if (!res?.[0]?.[1]) {
      await this.redis.del(key)
      return false
    }
    return true
  }

  async deleteSession(rec: Pick<SessionRecord, 'id' | 'tenant'>): Promise<void> {
    const eids = await this.redis.lrange(this.keys.sessionExecutions(rec.id), 0, -1)
    const m = this.redis
      .multi()
      .del(
        this.keys.session(rec.id),
        this.keys.sessionExecutions(rec.id),
        this.keys.sessionUnfinished(rec.id),
        this.keys.history(rec.id),
        this.keys.lease(rec.id),
      )
      .srem(this.keys.tenantSessions(rec.tenant), rec.id)
      .zrem(this.keys.deadlines(), rec.id)
    for (const eid of eids) m.expire(this.keys.execution(rec.id, eid), this.opts.eventTtlS).expire(this.keys.events(rec.id, eid), this.opts.eventTtlS)
    await m.exec()
  }

  async tenantSessionIds(tenant: string): Promise<string[]> {
    return (await this.redis.smembers(this.keys.tenantSessions(tenant))).sort()
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

  /** Execution start: session busy (its deadline after the execution's own limit), execution running, optionally its `running` status event. */
  async recordStart(sid: string, eid: string, startedAt: number, statusEvent: object | null, deadlineMs: number, tenant: string): Promise<void> {
    const m = this.redis
      .multi()
      .eval(SESSION_ACTIVITY, 2, this.keys.session(sid), this.keys.deadlines(), Math.ceil(deadlineMs), sid, 'status', 'busy', 'last_active_at', startedAt)
      .hset(this.keys.execution(sid, eid), toHash({ status: 'running', started_at: startedAt }))
    if (statusEvent) this.eventBytes.appendIn(m, tenant, sid, eid, statusEvent)
    await m.exec()
  }

  /**
   * Execution end, in one round trip: the `done` event (null: the execution logs into another's log,
   * which ends it itself), the execution record (and its expiry), the tenant's running slot, and
   * (when `session` is given) the session's status and idle deadline.
   */
  async recordEnd(
    sid: string,
    eid: string,
    tenant: string,
    done: object | null,
    fields: Partial<ExecutionRecord>,
    session: { fields: Partial<SessionRecord>; deadlineMs: number } | null,
  ): Promise<void> {
    const m = this.redis.multi()
    this.eventBytes.endIn(m, tenant, sid, eid, done)
    m.hset(this.keys.execution(sid, eid), toHash(fields))
      .expire(this.keys.execution(sid, eid), this.opts.eventTtlS)
      .expire(this.keys.events(sid, eid), this.opts.eventTtlS)
      .zrem(this.keys.tenantRunning(tenant), eid)
      .srem(this.keys.sessionUnfinished(sid), eid)
    if (session)
      m.eval(SESSION_ACTIVITY, 2, this.keys.session(sid), this.keys.deadlines(), session.deadlineMs, sid, ...Object.entries(toHash(session.fields)).flat())
    await m.exec()
  }

  /** Claims up to `max` sessions due at `nowMs` until `nowMs + claimMs`; settle each claim when its work is done. */
  async claimDue(nowMs: number, claimMs: number, max = 100): Promise<string[]> {
    return (await this.redis.eval(CLAIM_DUE, 1, this.keys.deadlines(), nowMs, max, nowMs + claimMs)) as string[]
  }

  /** Replaces the claim (made with `claimedUntil`) by the session's next deadline; false when something moved it meanwhile. */
  async settleClaim(id: string, claimedUntil: number, deadlineMs: number): Promise<boolean> {
    return (await this.redis.eval(SETTLE_CLAIM, 1, this.keys.deadlines(), id, String(claimedUntil), deadlineMs)) === 1
  }

  // ---- leases: which API instance is attached to a session ----
  async acquireLease(sid: string, instanceId: string, ttlMs: number): Promise<string> {
    return (await this.redis.eval(ACQUIRE_LEASE, 1, this.keys.lease(sid), instanceId, ttlMs)) as string
  }

  /** Renews the leases that are still ours; returns each session's holder. */
  async renewLeases(sids: string[], instanceId: string, ttlMs: number): Promise<Array<[string, string]>> {
    if (sids.length === 0) return []
    const p = this.redis.pipeline()
    for (const sid of sids) p.eval(ACQUIRE_LEASE, 1, this.keys.lease(sid), instanceId, ttlMs)
    const res = (await p.exec()) ?? []
    return sids.map((sid, i) => {
      const holder = res[i]?.[1]
      return [sid, typeof holder === 'string' ? holder : instanceId]
    })
  }

  /** Takes the lease if it is free, ours, or `from`'s (null: only free or ours); returns the holder. */
  async takeLease(sid: string, instanceId: string, from: string | null, ttlMs: number): Promise<string> {
    return (await this.redis.eval(TAKE_LEASE, 1, this.keys.lease(sid), instanceId, from ?? '', ttlMs)) as string
  }

  /** Frees the leases among `sids` that are still this instance's (a hand-over), in one round trip. */
  async releaseLeases(sids: string[], instanceId: string): Promise<void> {
    if (sids.length === 0) return
    const p = this.redis.pipeline()
    for (const sid of sids) p.eval(RELEASE_LEASE, 1, this.keys.lease(sid), instanceId)
    await p.exec()
  }

  async leaseHolder(sid: string): Promise<string | null> {
    return this.redis.get(this.keys.lease(sid))
  }

  async releaseLease(sid: string, instanceId: string): Promise<void> {
    const key = this.keys.lease(sid)
    if ((await this.redis.get(key)) === instanceId) await this.redis.del(key)
  }

  async addInstanceSession(iid: string, sid: string): Promise<void> {
    await this.redis.sadd(this.keys.instanceSessions(iid), sid)
  }
  async removeInstanceSession(iid: string, sid: string): Promise<void> {
    await this.redis.srem(this.keys.instanceSessions(iid), sid)
  }
  async instanceSessionIds(iid: string): Promise<string[]> {
    return this.redis.smembers(this.keys.instanceSessions(iid))
  }

  /** A secret shared by every API instance of this deployment (created on first use). */
  async sharedSecret(): Promise<string> {
    const key = this.keys.secret()
    await this.redis.set(key, randomBytes(32).toString('hex'), 'NX')
    return (await this.redis.get(key)) ?? ''
  }

  // ---- quotas ----
  /** Takes one of the tenant's `max` execution slots for `eid` until `untilMs` at the latest. */
  async acquireRunningSlot(tenant: string, eid: string, max: number, untilMs: number): Promise<boolean> {
    return (await this.redis.eval(ACQUIRE_SLOT, 1, this.keys.tenantRunning(tenant), Date.now(), max, Math.ceil(untilMs), eid)) === 1
  }

  async releaseRunningSlot(tenant: string, eid: string): Promise<void> {
    await this.redis.zrem(this.keys.tenantRunning(tenant), eid)
  }

  /** Counts a request in the tenant's current one-minute window; returns the count so far. */
  async countRequest(tenant: string, nowMs: number): Promise<{ count: number; resetMs: number }> {
    const window = Math.floor(nowMs / 60000)
    const key = this.keys.tenantRate(tenant, window)
    const res = await this.redis.multi().incr(key).pexpire(key, 61000).exec()
    return { count: Number(res?.[0]?.[1] ?? 0), resetMs: (window + 1) * 60000 - nowMs }
  }

  // ---- executions and their event logs ----
  /** Records a new execution and, in the same round trip, its first event (the `status` one; null: it logs elsewhere). */
  async createExecution(rec: ExecutionRecord, firstEvent: object | null, keepPerSession = 100): Promise<void> {
    const m = this.redis
      .multi()
      .hset(this.keys.execution(rec.session_id, rec.id), toHash(rec))
      .lpush(this.keys.sessionExecutions(rec.session_id), rec.id)
      .ltrim(this.keys.sessionExecutions(rec.session_id), 0, keepPerSession - 1)
      .sadd(this.keys.sessionUnfinished(rec.session_id), rec.id)
    if (firstEvent) this.eventBytes.appendIn(m, rec.tenant, rec.session_id, rec.id, firstEvent)
    await m.exec()
  }

  async updateExecution(sid: string, eid: string, fields: Partial<ExecutionRecord>): Promise<void> {
    await this.redis.hset(this.keys.execution(sid, eid), toHash(fields))
  }

  async getExecution(sid: string, eid: string): Promise<ExecutionRecord | null> {
    const h = await this.redis.hgetall(this.keys.execution(sid, eid))
    return h.id ? fromHash<ExecutionRecord>(h) : null
  }

  /**
   * Appends one event; returns its stream id (the SSE id), or null when the tenant's max_event_bytes
   * refused it (the log then got a `limit` event; `force`: small events that must be kept).
   */
  async appendEvent(sid: string, eid: string, event: { type: string; [k: string]: unknown }, tenant: string, force = false): Promise<string | null> {
    return this.eventBytes.append(tenant, sid, eid, event, force)
  }

  /** The log's last event (null: none). */
  async lastEvent(sid: string, eid: string): Promise<LoggedEvent | null> {
    const [row] = await this.redis.xrevrange(this.keys.events(sid, eid), '+', '-', 'COUNT', 1)
    return row ? { ...(JSON.parse(row[1][1] ?? '{}') as { type: string }), id: row[0] } : null
  }

  /**
   * Where the host was in a running execution's frames, from the newest event that says (`pos`:
   * frames handled so far, `seq`: the REPL's seq then); {0, -1} when none does.
   */
  async resumePoint(sid: string, eid: string): Promise<{ pos: number; seq: number }> {
    const rows = await this.redis.xrevrange(this.keys.events(sid, eid), '+', '-', 'COUNT', 100)
    for (const [, fields] of rows) {
      const e = JSON.parse(fields[1] ?? '{}') as { pos?: unknown; seq?: unknown }
      if (typeof e.pos === 'number') return { pos: e.pos, seq: typeof e.seq === 'number' ? e.seq : -1 }
    }
    return { pos: 0, seq: -1 }
  }

  /** Events after `afterId` (exclusive; '' = from the start), oldest first: one page, bounded by `count` and by bytes. */
  async readEvents(sid: string, eid: string, afterId: string, count = 100): Promise<LoggedEvent[]> {
    let rows: Array<[string, string[]]>
    try {
      rows = await readPage(this.redis, this.keys.events(sid, eid), afterId, count)
    } catch (err) {
      // Nothing can follow the largest possible id.
      if (/invalid start ID/i.test((err as Error).message)) return []
      throw err
    }
    return rows.map(([id, fields]) => ({ ...(JSON.parse(fields[1] ?? '{}') as { type: string }), id }))
  }
}
