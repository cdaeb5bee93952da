// Execution records in Redis: an execution queued (with its tenant slot and first event, in one
// round trip), started, ended (its `done`, its record, its slot and its session's status, in one
// round trip), and read. Each session lists its executions, newest first, and keeps a set of the
// unfinished ones.
import type { Redis } from 'ioredis'
import type { Appended, EventBytes } from './event-bytes.js'
import { parseAppend } from './event-bytes.js'
import type { RedisKeys } from './keys.js'
import { PACKED_FIELD } from './log-packing.js'
import { TRIM_EXECUTIONS } from './log-scripts.js'
import { fromHash, toHash, type ExecutionRecord, type SessionRecord } from './records.js'
import { defineScripts, queueScript } from './scripts.js'
import { SESSION_ACTIVITY } from './session-scripts.js'

export class ExecutionStore {
  constructor(
    private readonly redis: Redis,
    private readonly keys: RedisKeys,
    /** Every event a record's write appends is counted against its tenant's max_event_bytes. */
    private readonly eventBytes: EventBytes,
    private readonly opts: { eventTtlS: number },
  ) {
    // Queued in MULTIs (recordStart, createExecution): defined on the connection first.
    defineScripts(redis, [SESSION_ACTIVITY, TRIM_EXECUTIONS])
  }

  /**
   * Queues a new execution in one round trip: checks that its session is there, the tenant's and not
   * dead, takes one of the tenant's `max` running slots until `untilMs` at the latest, records it with
   * its first event (the `status` one; null: it logs elsewhere). A record that is `running` (with
   * `idleDeadlineMs`) starts at once: its session is made busy here, as recordStart would make it.
   * `term`: the lease term of the instance that runs it ('' none); 'lost' when the lease has passed to another.
   */
  async startExecution(
    rec: ExecutionRecord,
    firstEvent: object | null,
    slot: { max: number; untilMs: number; idleDeadlineMs?: number },
    term = '',
    keepPerSession = 100,
  ): ReturnType<EventBytes['start']> {
    const idleDeadlineMs = rec.status === 'running' ? (slot.idleDeadlineMs ?? null) : null
    const settings = { max: slot.max, untilMs: slot.untilMs, keepPerSession, now: rec.created_at, idleDeadlineMs }
    return this.eventBytes.start(rec, toHash(rec), firstEvent, settings, term)
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
   * `expected`: the id the done is expected to get; `term`: the writer's lease term, refused with
   * LeaseLost once the lease has passed to another (see EventBytes.end).
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
    term = '',
  ): Promise<Appended | null> {
    const s = session ? { fields: toHash(session.fields), deadlineMs: session.deadlineMs } : null
    return this.eventBytes.end({ tenant, sid, eid }, done, toHash(fields), s, before, expected, term)
  }

  async updateExecution(sid: string, eid: string, fields: Partial<ExecutionRecord>): Promise<void> {
    await this.redis.hset(this.keys.execution(sid, eid), toHash(fields))
  }

  async getExecution(sid: string, eid: string): Promise<ExecutionRecord | null> {
    const h = await this.redis.hgetall(this.keys.execution(sid, eid))
    delete h[PACKED_FIELD]
    return h.id ? fromHash<ExecutionRecord>(h) : null
  }

  /** The ids of the session's `newest` latest executions, and of those in its set of unfinished ones (read at once). */
  async openCandidates(sid: string, newest: number): Promise<[listed: string[], unfinished: string[]]> {
    return Promise.all([this.redis.lrange(this.keys.sessionExecutions(sid), 0, newest - 1), this.redis.smembers(this.keys.sessionUnfinished(sid))])
  }

  /** Takes executions whose record ended or expired out of the session's set of unfinished ones. */
  async forgetUnfinished(sid: string, eids: string[]): Promise<void> {
    if (eids.length) await this.redis.srem(this.keys.sessionUnfinished(sid), ...eids)
  }
}
