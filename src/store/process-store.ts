// Background processes in Redis: each one's record, the session's list of them and the set of
// those running (which max_processes counts), recorded in one round trip (process-scripts.ts) and
// ended in one (the `exit` event, the record's end and expiry: log-scripts.ts's END, as for an
// execution). A process's output is the event log `events(sid, pid)`, appended by EventLogStore
// and read by the event feed like any other log.
import type { Redis } from 'ioredis'
import type { Appended, EventBytes } from './event-bytes.js'
import type { RedisKeys } from './keys.js'
import { START_PROCESS } from './process-scripts.js'
import { fromHash, toHash, type ProcessRecord } from './records.js'
import { runScript } from './scripts.js'

export type ProcessStart = { result: 'started' | 'too_many' | 'no_session' | 'lost' } | { result: 'dead'; why: string }

export class ProcessStore {
  constructor(
    private readonly redis: Redis,
    private readonly keys: RedisKeys,
    /** Every event of a process's log is counted against its tenant's max_event_bytes. */
    private readonly eventBytes: EventBytes,
    private readonly opts: { prefix: string; maxLen: number; limitFor: (tenant: string) => number },
  ) {}

  /**
   * Records a running process unless `max` already run in its session, in one round trip that also
   * checks the session (there, the tenant's, not dead) and the writer's lease `term` ('' none), and
   * moves the session's idle deadline to `idleDeadlineMs`. At most `keep` processes stay listed.
   */
  async start(rec: ProcessRecord, limits: { max: number; keep: number; idleDeadlineMs: number }, term: string): Promise<ProcessStart> {
    const k = this.keys
    const { tenant, session_id: sid, id: pid } = rec
    const [code, why] = (await runScript(
      this.redis,
      START_PROCESS,
      k.events(sid, pid),
      k.tenantEventBytes(tenant),
      k.tenantLogBytes(tenant),
      k.tenantEndedLogs(tenant),
      k.tenantTruncatedLogs(tenant),
      k.session(sid),
      k.sessionProcesses(sid),
      k.sessionRunningProcesses(sid),
      k.process(sid, pid),
      k.deadlines(),
      `${sid}/${pid}`,
      String(this.opts.limitFor(tenant)),
      String(this.opts.maxLen),
      this.opts.prefix,
      term,
      tenant,
      String(limits.max),
      String(rec.started_at),
      String(limits.keep),
      String(Math.ceil(limits.idleDeadlineMs)),
      ...Object.entries(toHash(rec)).flat(),
    )) as [number, string?]
    if (code === 1) return { result: 'started' }
    if (code === 0) return { result: 'too_many' }
    if (code === -2) return { result: 'dead', why: why ?? '' }
    return { result: code === -3 ? 'lost' : 'no_session' }
  }

  /**
   * Ends a process, in one round trip: its log's last events (`before`, then `exit`), the record's
   * end `fields` and expiry (with its log's), its place among the running ones. `term`: the writer's
   * lease term ('' none); throws LeaseLost once the lease has passed to another. Resolves with what was added to the log.
   */
  async end(
    rec: { tenant: string; sid: string; pid: string },
    exit: object,
    fields: Pick<ProcessRecord, 'exit_code' | 'ended_at'>,
    before: object[],
    term: string,
  ): Promise<Appended | null> {
    const { tenant, sid, pid } = rec
    const k = this.keys
    const ends = { tenant, sid, eid: pid, record: k.process(sid, pid), unfinished: k.sessionRunningProcesses(sid) }
    return this.eventBytes.end(ends, exit, toHash({ ...fields, status: 'exited' }), null, before, '', term)
  }

  async get(sid: string, pid: string): Promise<ProcessRecord | null> {
    const h = await this.redis.hgetall(this.keys.process(sid, pid))
    return h.id ? fromHash<ProcessRecord>(h) : null
  }

  /** The session's processes, oldest first (those whose record expired are dropped from its list). */
  async list(sid: string): Promise<ProcessRecord[]> {
    const ids = await this.redis.zrange(this.keys.sessionProcesses(sid), '0', '-1')
    if (ids.length === 0) return []
    const p = this.redis.pipeline()
    for (const pid of ids) p.hgetall(this.keys.process(sid, pid))
    const rows = (await p.exec()) ?? []
    const gone = ids.filter((_, i) => !(rows[i]?.[1] as Record<string, string> | undefined)?.id)
    if (gone.length) await this.redis.zrem(this.keys.sessionProcesses(sid), ...gone)
    return rows.flatMap(([, h]) => ((h as Record<string, string> | undefined)?.id ? [fromHash<ProcessRecord>(h as Record<string, string>)] : []))
  }

  /** The ids of the session's processes recorded as running. */
  async runningIds(sid: string): Promise<string[]> {
    return this.redis.smembers(this.keys.sessionRunningProcesses(sid))
  }

  /** Forgets a process: its record, its place in the session's lists, its log (its bytes given back to the tenant). */
  async remove(tenant: string, sid: string, pid: string): Promise<void> {
    const k = this.keys
    const m = this.redis.multi().del(k.process(sid, pid)).zrem(k.sessionProcesses(sid), pid).srem(k.sessionRunningProcesses(sid), pid)
    this.eventBytes.dropIn(m, tenant, sid, [pid])
    await m.exec()
  }

  /** The ids of every process the session lists (a deleted session's logs are dropped with them). */
  async allIds(sid: string): Promise<string[]> {
    return this.redis.zrange(this.keys.sessionProcesses(sid), '0', '-1')
  }
}
