// What a tenant's execution logs hold in Redis, kept within its max_event_bytes: every entry
// appended is counted; past the limit the tenant's oldest ended logs are dropped, then a live log is
// truncated (one `limit` event, then nothing but its status and done). The scripts that do it are in
// log-scripts.ts; this is their caller's side: their arguments, and what their replies added.
import type { ChainableCommander, Redis } from 'ioredis'
import type { RedisKeys } from './keys.js'
import { LeaseLost } from './lease-store.js'
import { eventJson } from '../event-json.js'
import { APPEND_SCRIPT, DROP_SCRIPT, END_SCRIPT, START_SCRIPT } from './log-scripts.js'
import type { LoggedEvent } from './records.js'
import { defineScripts, queueScript, runScript } from './scripts.js'

/**
 * Entries a call added to a log, in order: `prev` is the id the log ended at before them ('' when it
 * was empty), so a reader that has read up to `prev` can take them as they are.
 */
export interface Appended {
  prev: string
  events: LoggedEvent[]
  /** Their JSON's length. */
  bytes: number
  /** How many of them are the caller's own events (the others: a `limit` event that the tenant's budget added). */
  own: number
}

/**
 * Events handed to readers before Redis has stored them ("ahead": the calls that append them keep them
 * whatever the tenant's budget, so Redis cannot decide otherwise) are at most this many bytes of JSON
 * per call, an execution's `done` aside.
 */
const AHEAD_MAX_BYTES = 1024

/**
 * How an append treats its events: `plain` within the tenant's budget; `kept` whatever the budget
 * (a status, or output already handed to readers: see appendedAhead); `jump` within the budget, the
 * first under an id a millisecond past the log's (see add in log-scripts.ts).
 */
export type AppendMode = 'plain' | 'kept' | 'jump'
const APPEND_MODE: Record<AppendMode, string> = { plain: '0', kept: '1', jump: 'j' }

/** The id a log's entry after `id` gets ("ms-seq": the same milliseconds, sequence + 1; see add in log-scripts.ts). */
function nextId(id: string): string {
  const dash = id.indexOf('-')
  return `${id.slice(0, dash)}-${Number(id.slice(dash + 1)) + 1}`
}

/**
 * What a call that keeps `events` (then `done`, ending an execution: see END) whatever the budget
 * adds to a log that ends at `last`, ids included. Null when `events` are too large for that.
 */
export function appendedAhead(last: string, events: object[], done: object | null = null): Appended | null {
  const added: LoggedEvent[] = []
  let id = last
  let bytes = 0
  for (const event of events) {
    bytes += eventJson(event).length
    if (bytes > AHEAD_MAX_BYTES) return null
    added.push({ ...event, id: (id = nextId(id)) } as LoggedEvent)
  }
  if (done) {
    bytes += eventJson(done).length
    added.push({ ...done, id: nextId(id) } as LoggedEvent)
  }
  return { prev: last, events: added, bytes, own: added.length }
}

/** Events of the caller's own in a script's call: the one ('' in its reply), and the list ('@n': the n-th). */
interface Own {
  one?: { event: object; json: string } | null
  list?: Array<{ event: object; json: string }>
}

/** The added part of a script's reply: prev, then id and JSON pairs (marks stand for events of `own`, which the caller has). */
function appended(raw: unknown, own: Own): Appended | null {
  if (!Array.isArray(raw) || raw.length === 0) return null
  const [prev, ...rest] = raw as string[]
  const events: LoggedEvent[] = []
  let bytes = 0
  let mineCount = 0
  for (let i = 0; i + 1 < rest.length; i += 2) {
    const id = rest[i]!
    const json = rest[i + 1]!
    const mine = json === '' ? own.one : json.startsWith('@') ? own.list?.[Number(json.slice(1)) - 1] : undefined
    events.push({ ...(mine ? mine.event : (JSON.parse(json) as object)), id } as LoggedEvent)
    bytes += mine ? mine.json.length : json.length
    if (mine) mineCount++
  }
  return { prev: prev ?? '', events, bytes, own: mineCount }
}

function own(event: object | null, json: string): Own {
  return { one: event ? { event, json } : null }
}

function ownList(events: object[]): Own {
  return { list: events.map((event) => ({ event, json: eventJson(event) })) }
}

/** Appends and ends event logs, counting their bytes against the tenant's max_event_bytes. */
export class EventBytes {
  constructor(
    private readonly redis: Redis,
    private readonly keys: RedisKeys,
    private readonly opts: { prefix: string; maxLen: number; ttlS: number; limitFor: (tenant: string) => number },
  ) {
    defineScripts(redis, [APPEND_SCRIPT, END_SCRIPT, START_SCRIPT, DROP_SCRIPT])
  }

  /** The keys and the first arguments every script of log-scripts.ts takes; `term`: the writer's lease term ('' none: see fenced there). */
  private args(tenant: string, sid: string, eid: string, term = ''): string[] {
    const k = this.keys
    return [
      k.events(sid, eid),
      k.tenantEventBytes(tenant),
      k.tenantLogBytes(tenant),
      k.tenantEndedLogs(tenant),
      k.tenantTruncatedLogs(tenant),
      `${sid}/${eid}`,
      String(this.opts.limitFor(tenant)),
      String(this.opts.maxLen),
      this.opts.prefix,
      term,
    ]
  }

  /**
   * Appends one event; resolves with its id (null when the tenant's budget refused it; `force`: never
   * refused) and what was added (a refusal may add a `limit` event).
   */
  async append(tenant: string, sid: string, eid: string, event: object, force = false): Promise<{ id: string | null; added: Appended | null }> {
    const mine = ownList([event])
    const [kept, raw] = (await runScript(this.redis, APPEND_SCRIPT, ...this.args(tenant, sid, eid), force ? '1' : '0', mine.list![0]!.json)) as [
      number,
      unknown,
    ]
    const added = appended(raw, mine)
    return { id: kept === 1 ? (added?.events.at(-1)?.id ?? null) : null, added }
  }

  /**
   * Appends events in order, in one round trip, within the tenant's budget (`ahead`: kept whatever it);
   * resolves with what was added. `term`: the writer's lease term; throws LeaseLost when the session's
   * lease has passed to another term (nothing is added then).
   */
  async appendMany(tenant: string, sid: string, eid: string, events: object[], mode: AppendMode = 'plain', term = ''): Promise<Appended | null> {
    const mine = ownList(events)
    const [kept, raw] = (await runScript(
      this.redis,
      APPEND_SCRIPT,
      ...this.args(tenant, sid, eid, term),
      APPEND_MODE[mode],
      ...mine.list!.map((e) => e.json),
    )) as [number, unknown]
    if (kept === -1) throw new LeaseLost(sid)
    return appended(raw, mine)
  }

  /**
   * Checks the session, takes a running slot and records the execution with its first event (null:
   * it logs elsewhere), in one round trip; see START. 'lost': the session's lease has passed to
   * another term than `term` (the writer's; '' none), nothing was written.
   */
  async start(
    rec: { id: string; session_id: string; tenant: string },
    fields: Record<string, string>,
    first: object | null,
    slot: { max: number; untilMs: number; keepPerSession: number; now: number; idleDeadlineMs: number | null },
    term = '',
  ): Promise<{ result: 'started'; added: Appended | null } | { result: 'no_slot' | 'no_session' | 'lost' } | { result: 'dead'; why: string }> {
    const k = this.keys
    const json = first ? JSON.stringify(first) : ''
    const log = this.args(rec.tenant, rec.session_id, rec.id, term)
    const now = slot.now
    const [code, extra] = (await runScript(
      this.redis,
      START_SCRIPT,
      ...log.slice(0, 5),
      k.tenantRunning(rec.tenant),
      k.execution(rec.session_id, rec.id),
      k.sessionExecutions(rec.session_id),
      k.sessionUnfinished(rec.session_id),
      k.session(rec.session_id),
      k.sessionOlder(rec.session_id),
      k.deadlines(),
      ...log.slice(5),
      json,
      String(now),
      String(slot.max),
      String(Math.ceil(slot.untilMs)),
      rec.id,
      String(slot.keepPerSession),
      rec.tenant,
      String(now + this.opts.ttlS * 1000),
      slot.idleDeadlineMs === null ? '' : String(Math.ceil(slot.idleDeadlineMs)),
      ...Object.entries(fields).flat(),
    )) as [number, unknown]
    if (code === 1) return { result: 'started', added: appended(extra, own(first, json)) }
    if (code === -2) return { result: 'dead', why: typeof extra === 'string' ? extra : '' }
    if (code === -3) return { result: 'lost' }
    return { result: code === 0 ? 'no_slot' : 'no_session' }
  }

  /** As part of a MULTI: drops a session's logs and execution records, and counts their bytes no more. */
  dropIn(m: ChainableCommander, tenant: string, sid: string, eids: string[]): void {
    if (eids.length === 0) return
    queueScript(m, DROP_SCRIPT, ...this.args(tenant, sid, eids[0]!), ...eids.map((eid) => `${sid}/${eid}`))
  }

  /** The same append (forced) as part of a MULTI; `parseAppend` reads its reply. */
  appendIn(m: ChainableCommander, tenant: string, sid: string, eid: string, event: object): void {
    queueScript(m, APPEND_SCRIPT, ...this.args(tenant, sid, eid), '1', eventJson(event))
  }

  /**
   * Ends an execution, in one round trip (see END): its log's last events (`before`: output that came
   * with the end, appended as appendMany would, then the done), the record's end `fields` and expiry,
   * its slot, and (`session` given) its session's fields and idle deadline. Resolves with what was
   * added to the log. `expected`: the id the caller expects the done to get, as appendedAhead predicted it
   * (its readers have the end already): nothing is added when the log holds it. `term`: the writer's
   * lease term ('' none); throws LeaseLost when the session's lease has passed to another (nothing is written then).
   * `rec.record` and `rec.unfinished`: another record and set than an execution's (a background
   * process's record, and its session's running processes).
   */
  async end(
    rec: { tenant: string; sid: string; eid: string; record?: string; unfinished?: string },
    done: object | null,
    fields: Record<string, string>,
    session: { fields: Record<string, string>; deadlineMs: number } | null,
    before: object[] = [],
    expected = '',
    term = '',
  ): Promise<Appended | null> {
    const { tenant, sid, eid } = rec
    const k = this.keys
    const now = Date.now()
    const ttlMs = this.opts.ttlS * 1000
    const json = done ? JSON.stringify(done) : ''
    const mine = ownList(before)
    const log = this.args(tenant, sid, eid, term)
    const recordArgs = Object.entries(fields).flat()
    const raw = await runScript(
      this.redis,
      END_SCRIPT,
      ...log.slice(0, 5),
      rec.record ?? k.execution(sid, eid),
      k.tenantRunning(tenant),
      rec.unfinished ?? k.sessionUnfinished(sid),
      k.session(sid),
      k.deadlines(),
      ...log.slice(5),
      json,
      String(now + ttlMs),
      String(now),
      String(ttlMs),
      eid,
      session ? String(Math.ceil(session.deadlineMs)) : '',
      String(recordArgs.length),
      String(before.length),
      expected,
      ...mine.list!.map((e) => e.json),
      ...recordArgs,
      ...(session ? Object.entries(session.fields).flat() : []),
    )
    if (raw === -1) throw new LeaseLost(sid)
    return appended(raw, { ...own(done, json), ...mine })
  }
}

/** What an appendIn added, from its reply in the MULTI's results. */
export function parseAppend(reply: unknown, event: object): Appended | null {
  return Array.isArray(reply) ? appended(reply[1], ownList([event])) : null
}
