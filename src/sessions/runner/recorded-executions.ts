// Executions known only from their Redis records: those a session left unfinished when no
// instance drove it, those whose end was never recorded (stale), and how such an execution is
// ended (an error saying why, then its `done`).
import type { Config } from '../../config.js'
import type { DoneStatusT } from '../../schemas.js'
import type { EventFeed } from '../../store/event-feed.js'
import type { ExecutionRecord, SessionRecord } from '../../store/records.js'
import type { Stores } from '../../store/stores.js'

export class RecordedExecutions {
  constructor(
    private readonly config: Config,
    private readonly stores: Pick<Stores, 'executions' | 'logs'>,
    private readonly feed: EventFeed,
  ) {}

  /** The session's queued or running executions (however many records came after them), newest first. */
  async unfinished(rec: SessionRecord): Promise<ExecutionRecord[]> {
    const { executions } = this.stores
    // Executions recorded before the set of unfinished ones existed are among the newest few.
    const [recent, members] = await executions.openCandidates(rec.id, this.config.EXEC_QUEUE_DEPTH + 2)
    const eids = [...new Set([...recent, ...members])]
    const recs = await Promise.all(eids.map((eid) => executions.getExecution(rec.id, eid)))
    const open = recs.filter((x): x is ExecutionRecord => x !== null && (x.status === 'queued' || x.status === 'running'))
    // Members whose record ended or expired without leaving the set: nothing may keep it growing.
    const closed = members.filter((eid) => !open.some((x) => x.id === eid))
    await executions.forgetUnfinished(rec.id, closed)
    return open.sort((a, b) => b.created_at - a.created_at)
  }

  /**
   * Unfinished executions whose end should have been recorded long ago (by more than `graceMs`):
   * what an instance leaves behind when it lost Redis or Docker at an execution's end. `drivenHere`
   * says what this instance drives when it holds the session; null: another instance holds it, and
   * then only a running execution past its own time limit counts (queued ones and LLM turns may
   * rightly wait that long there).
   */
  async stale(rec: SessionRecord, graceMs: number, drivenHere: ((ex: ExecutionRecord) => boolean) | null): Promise<ExecutionRecord[]> {
    const now = Date.now()
    const running = (ex: ExecutionRecord) => ex.status === 'running' && ex.started_at !== null && ex.kind !== 'turn'
    // A queued execution or a turn has no limit of its own: it is stale once nothing here drives it.
    const limit = (ex: ExecutionRecord) => (running(ex) ? (ex.started_at ?? 0) + (ex.timeout_ms ?? 0) + this.config.INTERRUPT_GRACE_MS : ex.created_at)
    return (await this.unfinished(rec)).filter((ex) => limit(ex) + graceMs < now && (drivenHere ? !drivenHere(ex) : running(ex)))
  }

  /** Ends an execution no instance can continue: an error event saying why, then its one `done`. */
  async endOrphaned(rec: SessionRecord, ex: ExecutionRecord, status: DoneStatusT, why: string): Promise<void> {
    const end = Date.now()
    const duration = end - (ex.started_at ?? ex.created_at)
    await this.stores.logs.appendEvent(rec.id, ex.id, { type: 'error', ename: 'SandboxError', evalue: why, traceback: [] }, rec.tenant, true)
    await this.stores.executions.recordEnd(rec.id, ex.id, rec.tenant, { type: 'done', status, duration_ms: duration }, { status, ended_at: end }, null)
    this.feed.notify(rec.id, ex.id)
  }
}
