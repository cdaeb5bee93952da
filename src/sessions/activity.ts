// What counts as a session's activity besides its executions (file calls, a terminal in use): the
// idle deadline of a ready session moves on; a busy one's is its execution's.
import type { Logger } from 'pino'
import type { SessionRecord } from '../store/records.js'
import type { Stores } from '../store/stores.js'

/** Moves a ready session's idle deadline and last activity to now (a failure is logged, not thrown). */
export async function recordActivity(
  stores: Pick<Stores, 'sessions'>,
  log: Pick<Logger, 'warn'>,
  rec: Pick<SessionRecord, 'id' | 'status' | 'idle_timeout_s'>,
  what: string,
): Promise<void> {
  if (rec.status !== 'ready') return
  const now = Date.now()
  try {
    await stores.sessions.setDeadline(rec.id, now + rec.idle_timeout_s * 1000)
    await stores.sessions.updateSession(rec.id, { last_active_at: now })
  } catch (err) {
    log.warn({ err, sessionId: rec.id }, `could not record ${what} activity`)
  }
}
