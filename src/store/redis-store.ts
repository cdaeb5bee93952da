// Redis is the only shared state: sessions, idle deadlines, leases, executions and
// their event logs (one Redis Stream per execution; stream ids are the SSE ids).
import { randomBytes } from 'node:crypto'
import type { Redis } from 'ioredis'
import { EventBytes, parseAppend, type Appended } from './event-bytes.js'
import { TRIM_EXECUTIONS } from './log-scripts.js'
import { readPage } from './event-pages.js'
import { PACKED_FIELD, unpack } from './log-packing.js'
import { defineScripts, queueScript, runScript } from './scripts.js'
import {
  ACQUIRE_LEASE,
  ACQUIRE_SLOT,
  CLAIM_DUE,
  CREATE_SESSION,
  RELEASE_LEASE,
  SESSION_ACTIVITY,
  SETTLE_CLAIM,
  TAKE_LEASE,
  UPDATE_SESSION,
} from './session-scripts.js'
import { redisKeys, type RedisKeys } from './keys.js'
import { fromHash, toHash, type ExecutionRecord, type LoggedEvent, type SessionRecord } from './records.js'

export type { ExecutionRecord, LoggedEvent, SessionRecord } from './records.js'
export { appendedAhead, type Appended } from './event-bytes.js'

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
    defineScripts(redis, [SESSION_ACTIVITY, ACQUIRE_LEASE, RELEASE_LEASE, TRIM_EXECUTIONS])
  }

  // ---- sessions ----
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
    const [listed, older] = await Promise.all([
      this.redis.lrange(this.keys.sessionExecutions(rec.id), 0, -1),
      this.redis.zrange(this.keys.sessionOlder(rec.id), '0', '-1'),
    ])
    const eids = [...listed, ...older]
    const m = this.redis
      .multi()
      .del(
        this.keys.session(rec.id),
        this.keys.sessionExecutions(rec.id),
        this.keys.sessionUnfinished(rec.id),
        this.keys.sessionOlder(rec.id),
        this.keys.history(rec.id),
        this.keys.lease(rec.id),
      )
      .srem(this.keys.tenantSessions(rec.tenant), rec.id)
      .zrem(this.keys.deadlines(), rec.id)
    // Its executions can no longer be read (reads go through the session): their logs go with it.
    this.eventBytes.dropIn(m, rec.tenant, rec.id, eids)
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

  /**
   * Execution start: session busy (its deadline after the execution's own limit), execution running,
   * optionally its `running` status event; resolves with what that added to the log.
   */
  async recordStart(sid: string, eid: string, startedAt: number, statusEvent: object | null, deadlineMs: number, tenant: string): Promise<Appended | null> {
    const m = this.redis.multi()
    queueScript(m, SESSION_ACTIVITY, this.keys.session(sid), this.keys.deadlines(), Math.ceil(deadlineMs), sid, 'status', 'busy', 'last_active_at', startedAt)
    m.hset(this.keys.execution(sid, eid), toHash({ status: 'running', started_at: startedAt }))
    if (statusEvent) this.eventBytes.appendIn(m, tenant, sid, eid, statusEvent)
    const res = await m.exec()
    return statusEvent ? parseAppend(res?.[2]?.[1], statusEvent) : null
  }

  /**
   * Execution end, in one round trip: the `done` event (null: the execution logs into another's log,
   * which ends it itself), the execution record (and its expiry), the tenant's running slot, and
   * (when `session` is given) the session's status and idle deadline. Resolves with what it added to the log.
   * `expected`: the id the done is expected to get (see EventBytes.end).
   */
  async recordEnd(
    sid: string,
    eid: string,
    tenant: string,
    done: object | null,
    fields: Partial<ExecutionRecord>,
    session: { fields: Partial<SessionRecord>; deadlineMs: number } | null,
    before: object[] = [],
    expected = '',
  ): Promise<Appended | null> {
    const s = session ? { fields: toHash(session.fields), deadlineMs: session.deadlineMs } : null
    return this.eventBytes.end({ tenant, sid, eid }, done, toHash(fields), s, before, expected)
  }

  /** Claims up to `max` sessions due at `nowMs` until `nowMs + claimMs`; settle each claim when its work is done. */
  async claimDue(nowMs: number, claimMs: number, max = 100): Promise<string[]> {
    return (await runScript(this.redis, CLAIM_DUE, this.keys.deadlines(), nowMs, max, nowMs + claimMs)) as string[]
  }

  /** Replaces the claim (made with `claimedUntil`) by the session's next deadline; false when something moved it meanwhile. */
  async settleClaim(id: string, claimedUntil: number, deadlineMs: number): Promise<boolean> {
    return (await runScript(this.redis, SETTLE_CLAIM, this.keys.deadlines(), id, String(claimedUntil), deadlineMs)) === 1
  }

  // ---- leases: which API instance is attached to a session ----
  async acquireLease(sid: string, instanceId: string, ttlMs: number): Promise<string> {
    return (await runScript(this.redis, ACQUIRE_LEASE, this.keys.lease(sid), instanceId, ttlMs)) as string
  }

  /** Renews the leases that are still ours; returns each session's holder. */
  async renewLeases(sids: string[], instanceId: string, ttlMs: number): Promise<Array<[string, string]>> {
    if (sids.length === 0) return []
    const p = this.redis.pipeline()
    for (const sid of sids) queueScript(p, ACQUIRE_LEASE, this.keys.lease(sid), instanceId, ttlMs)
    const res = (await p.exec()) ?? []
    return sids.map((sid, i) => {
      const holder = res[i]?.[1]
      return [sid, typeof holder === 'string' ? holder : instanceId]
    })
  }

  /** Takes the lease if it is free, ours, or `from`'s (null: only free or ours); returns the holder. */
  async takeLease(sid: string, instanceId: string, from: string | null, ttlMs: number): Promise<string> {
    return (await runScript(this.redis, TAKE_LEASE, this.keys.lease(sid), instanceId, from ?? '', ttlMs)) as string
  }

  /** Frees the leases among `sids` that are still this instance's (a hand-over), in one round trip. */
  async releaseLeases(sids: string[], instanceId: string): Promise<void> {
    if (sids.length === 0) return
    const p = this.redis.pipeline()
    for (const sid of sids) queueScript(p, RELEASE_LEASE, this.keys.lease(sid), instanceId)
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
    return (await runScript(this.redis, ACQUIRE_SLOT, this.keys.tenantRunning(tenant), Date.now(), max, Math.ceil(untilMs), eid)) === 1
  }

  async releaseRunningSlot(tenant: string, eid: string): Promise<void> {
    await this.redis.zrem(this.keys.tenantRunning(tenant), eid)
  }

  /** Adds `n` requests to the tenant's count for one minute (minutes since the epoch); returns every instance's count so far. */
  async addRequests(tenant: string, minute: number, n: number): Promise<number> {
    const key = this.keys.tenantRate(tenant, minute)
    const res = await this.redis.multi().incrby(key, n).pexpire(key, 61000).exec()
    const [err, count] = res?.[0] ?? [new Error('no reply')]
    if (err) throw err
    return Number(count)
  }

  // ---- executions and their event logs ----
  /**
   * Queues a new execution in one round trip: checks that its session is there, the tenant's and not
   * dead, takes one of the tenant's `max` running slots until `untilMs` at the latest, records it with
   * its first event (the `status` one; null: it logs elsewhere). A record that is `running` (with
   * `idleDeadlineMs`) starts at once: its session is made busy here, as recordStart would make it.
   */
  async startExecution(
    rec: ExecutionRecord,
    firstEvent: object | null,
    slot: { max: number; untilMs: number; idleDeadlineMs?: number },
    keepPerSession = 100,
  ): ReturnType<EventBytes['start']> {
    const idleDeadlineMs = rec.status === 'running' ? (slot.idleDeadlineMs ?? null) : null
    return this.eventBytes.start(rec, toHash(rec), firstEvent, { max: slot.max, untilMs: slot.untilMs, keepPerSession, now: rec.created_at, idleDeadlineMs })
  }

  /** Records a new execution and, in the same round trip, its first event (the `status` one; null: it logs elsewhere). */
  async createExecution(rec: ExecutionRecord, firstEvent: object | null, keepPerSession = 100): Promise<void> {
    const m = this.redis.multi().hset(this.keys.execution(rec.session_id, rec.id), toHash(rec)).lpush(this.keys.sessionExecutions(rec.session_id), rec.id)
    queueScript(
      m,
      TRIM_EXECUTIONS,
      this.keys.sessionExecutions(rec.session_id),
      this.keys.sessionOlder(rec.session_id),
      keepPerSession,
      Date.now() + this.opts.eventTtlS * 1000,
      Date.now(),
    )
    m.sadd(this.keys.sessionUnfinished(rec.session_id), rec.id)
    if (firstEvent) this.eventBytes.appendIn(m, rec.tenant, rec.session_id, rec.id, firstEvent)
    await m.exec()
  }

  async updateExecution(sid: string, eid: string, fields: Partial<ExecutionRecord>): Promise<void> {
    await this.redis.hset(this.keys.execution(sid, eid), toHash(fields))
  }

  async getExecution(sid: string, eid: string): Promise<ExecutionRecord | null> {
    const h = await this.redis.hgetall(this.keys.execution(sid, eid))
    delete h[PACKED_FIELD]
    return h.id ? fromHash<ExecutionRecord>(h) : null
  }

  /**
   * Appends one event; returns its stream id (the SSE id), or null when the tenant's max_event_bytes
   * refused it (the log then got a `limit` event; `force`: small events that must be kept).
   */
  async appendEvent(sid: string, eid: string, event: { type: string; [k: string]: unknown }, tenant: string, force = false): Promise<string | null> {
    return (await this.eventBytes.append(tenant, sid, eid, event, force)).id
  }

  /** Appends one event like appendEvent; resolves with what was added (for local readers: EventFeed.deliver). */
  async appendLive(sid: string, eid: string, event: { type: string; [k: string]: unknown }, tenant: string): Promise<Appended | null> {
    return (await this.eventBytes.append(tenant, sid, eid, event)).added
  }

  /** Appends events in order, in one round trip, like appendLive each (`ahead`: kept whatever the tenant's budget, see appendedAhead). */
  async appendLiveMany(
    sid: string,
    eid: string,
    events: Array<{ type: string; [k: string]: unknown }>,
    tenant: string,
    ahead = false,
  ): Promise<Appended | null> {
    return this.eventBytes.appendMany(tenant, sid, eid, events, ahead)
  }

  /** The log's last event (null: none). */
  async lastEvent(sid: string, eid: string): Promise<LoggedEvent | null> {
    // The stream, or the record its log was packed into (log-packing.ts): both asked at once.
    const [[row], packed] = await Promise.all([
      this.redis.xrevrange(this.keys.events(sid, eid), '+', '-', 'COUNT', 1),
      this.redis.hget(this.keys.execution(sid, eid), PACKED_FIELD),
    ])
    const [id, json] = row ? [row[0], row[1][1]] : (unpack(packed).at(-1) ?? [])
    return id ? { ...(JSON.parse(json ?? '{}') as { type: string }), id } : null
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
    return (await this.readEventPage(sid, eid, afterId, count)).events
  }

  /** Like readEvents; `more`: the page was cut by its bounds, so more events may follow it. */
  async readEventPage(sid: string, eid: string, afterId: string, count = 100): Promise<{ events: LoggedEvent[]; more: boolean }> {
    let page: { rows: Array<[string, string[]]>; more: boolean }
    try {
      page = await readPage(this.redis, this.keys.events(sid, eid), this.keys.execution(sid, eid), afterId, count)
    } catch (err) {
      // Nothing can follow the largest possible id.
      if (/invalid start ID/i.test((err as Error).message)) return { events: [], more: false }
      throw err
    }
    return { events: page.rows.map(([id, fields]) => ({ ...(JSON.parse(fields[1] ?? '{}') as { type: string }), id })), more: page.more }
  }
}
