// Execution logs driven by code in this process rather than by one REPL execution: an LLM
// turn's log, which its steps write into and which the turn ends itself with its one `done`.
// Only the instance that drives a log can end it; adoption ends those no instance drives.
import type { DoneStatusT } from '../../schemas.js'
import type { EventFeed } from '../../store/event-feed.js'
import type { Stores } from '../../store/stores.js'
import type { EventPayload } from './execution.js'
import { newId } from '../ids.js'

export class DrivenLog {
  private interruptHandler: (() => boolean) | null = null

  /** `queued`: its first status event said queued (it waits behind other work), so its start is announced. */
  constructor(
    readonly sessionId: string,
    readonly id: string,
    private readonly tenant: string,
    readonly queued: boolean,
    private readonly owner: DrivenLogs,
  ) {}

  /** Appends an event; resolves with its id once it is in the log ('' when the tenant's max_event_bytes refused it). */
  async append(event: EventPayload): Promise<string> {
    const id = await this.owner.stores.logs.appendEvent(this.sessionId, this.id, event, this.tenant, event.type === 'status')
    this.owner.feed.notify(this.sessionId, this.id)
    return id ?? ''
  }

  /** Its work began: the record says running (and the log too, when it first said queued). */
  async markRunning(): Promise<void> {
    if (this.queued) await this.append({ type: 'status', state: 'running', execution_id: this.id })
    await this.owner.stores.executions.updateExecution(this.sessionId, this.id, { status: 'running', started_at: Date.now() })
  }

  /** What an interrupt of the session does while none of its REPL executions runs; true when it acted. */
  onInterrupt(handler: () => boolean): void {
    this.interruptHandler = handler
  }
  interrupt(): boolean {
    return this.interruptHandler?.() ?? false
  }

  /** Writes the one `done` and the record's end in one round trip; the log is then no longer driven here. */
  async finish(status: DoneStatusT, durationMs: number, started: boolean): Promise<void> {
    const done = { type: 'done', status, duration_ms: durationMs }
    try {
      await this.owner.stores.executions.recordEnd(
        this.sessionId,
        this.id,
        this.tenant,
        done,
        { status, ended_at: Date.now(), duration_ms: durationMs, ...(started ? {} : { started_at: null }) },
        null,
      )
      this.owner.feed.notify(this.sessionId, this.id)
    } finally {
      this.owner.close(this)
    }
  }
}

export class DrivenLogs {
  private readonly open = new Map<string, DrivenLog>()

  constructor(
    readonly stores: Pick<Stores, 'executions' | 'logs'>,
    readonly feed: EventFeed,
  ) {}

  /** Records a new driven execution (kind turn) with its first status event. */
  async create(sid: string, tenant: string, queued: boolean): Promise<DrivenLog> {
    const id = newId('exe')
    const state = queued ? 'queued' : 'running'
    await this.stores.executions.createExecution(
      {
        id,
        session_id: sid,
        tenant,
        status: state,
        created_at: Date.now(),
        started_at: null,
        ended_at: null,
        duration_ms: null,
        execution_count: null,
        kind: 'turn',
      },
      { type: 'status', state, execution_id: id },
    )
    const log = new DrivenLog(sid, id, tenant, queued, this)
    this.open.set(id, log)
    return log
  }

  /** Whether this process drives the log `id` (it will write its done itself). */
  drives(id: string): boolean {
    return this.open.has(id)
  }

  /** Whether this process drives a log of session `sid` (an LLM turn between its steps). */
  drivesSession(sid: string): boolean {
    for (const log of this.open.values()) if (log.sessionId === sid) return true
    return false
  }

  /** Offers an interrupt of the session to its driven logs; true when one acted. */
  interruptSession(sid: string): boolean {
    let hit = false
    for (const log of this.open.values()) if (log.sessionId === sid && log.interrupt()) hit = true
    return hit
  }

  close(log: DrivenLog): void {
    this.open.delete(log.id)
  }
}
