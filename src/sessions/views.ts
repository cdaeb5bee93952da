// Stored records → the API's shapes (Session, Execution).
import type { ExecutionT, SessionT } from '../schemas.js'
import type { ExecutionRecord, LoggedEvent, SessionRecord } from '../store/records.js'
import { DEFAULT_TEMPLATE } from '../templates.js'

const iso = (ms: number) => new Date(ms).toISOString()

export function toSession(r: SessionRecord): SessionT {
  const hibernatedAt = r.status === 'hibernated' ? r.hibernated_at : null
  const ttl = r.hibernated_ttl_s ?? 0
  return {
    id: r.id,
    status: r.status,
    created_at: iso(r.created_at),
    last_active_at: iso(r.last_active_at),
    expires_at: iso(hibernatedAt ? hibernatedAt + ttl * 1000 : r.last_active_at + r.idle_timeout_s * 1000),
    idle_timeout_s: r.idle_timeout_s,
    idle_action: r.idle_action ?? 'delete',
    hibernated_ttl_s: ttl,
    ...(hibernatedAt ? { hibernated_at: iso(hibernatedAt) } : {}),
    runtime: r.runtime,
    limits: r.limits,
    metadata: r.metadata,
    execution_count: r.execution_count ?? 0,
    template: r.template || DEFAULT_TEMPLATE,
    ...(r.status === 'dead' && r.status_detail ? { status_detail: r.status_detail } : {}),
  }
}

/** A logged event as the API shows it (the REPL's frame sequence number and the host's frame position are the host's business). */
export const toEvent = ({ seq: _seq, pos: _pos, ...e }: LoggedEvent): ExecutionT['events'][number] => e as ExecutionT['events'][number]

export function toExecution(r: ExecutionRecord, events: LoggedEvent[]): ExecutionT {
  return {
    id: r.id,
    session_id: r.session_id,
    status: r.status as ExecutionT['status'],
    created_at: iso(r.created_at),
    started_at: r.started_at ? iso(r.started_at) : null,
    ended_at: r.ended_at ? iso(r.ended_at) : null,
    duration_ms: r.duration_ms,
    execution_count: r.execution_count,
    events: events.map(toEvent),
  }
}
