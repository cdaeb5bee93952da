// Executions known only from their Redis records: those a session left unfinished when no
// instance drove it, and how such an execution is ended (an error saying why, then its `done`).
import type { Config } from '../config.js'
import type { DoneStatusT } from '../schemas.js'
import type { EventFeed } from '../store/event-feed.js'
import type { ExecutionRecord, RedisStore, SessionRecord } from '../store/redis-store.js'

export class RecordedExecutions {
  constructor(
    private readonly config: Config,
    private readonly store: RedisStore,
    private readonly feed: EventFeed,
  ) {}

  /** The session's queued or running executions, newest first. */
  async unfinished(rec: SessionRecord): Promise<ExecutionRecord[]> {
    const eids = await this.store.redis.lrange(this.store.keys.sessionExecutions(rec.id), 0, this.config.EXEC_QUEUE_DEPTH + 1)
    const recs = await Promise.all(eids.map((eid) => this.store.getExecution(rec.id, eid)))
    return recs.filter((x): x is ExecutionRecord => x !== null && (x.status === 'queued' || x.status === 'running'))
  }

  /** Ends an execution no instance can continue: an error event saying why, then its one `done`. */
  async endOrphaned(rec: SessionRecord, ex: ExecutionRecord, status: DoneStatusT, why: string): Promise<void> {
    const end = Date.now()
    const duration = end - (ex.started_at ?? ex.created_at)
    await this.store.appendEvent(rec.id, ex.id, { type: 'error', ename: 'SandboxError', evalue: why, traceback: [] })
    await this.store.recordEnd(rec.id, ex.id, rec.tenant, { type: 'done', status, duration_ms: duration }, { status, ended_at: end }, null)
    this.feed.notify(rec.id, ex.id)
  }
}
