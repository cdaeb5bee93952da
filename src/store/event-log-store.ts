// Execution event logs in Redis (one Stream per execution; stream ids are the SSE ids): appending
// events, counted against the tenant's max_event_bytes, and reading them back in bounded pages, from
// the stream or from the record a small ended log was packed into (log-packing.ts).
import type { Redis } from 'ioredis'
import type { AppendMode, Appended, EventBytes } from './event-bytes.js'
import { readPage } from './event-pages.js'
import type { RedisKeys } from './keys.js'
import { PACKED_FIELD, unpack } from './log-packing.js'
import type { LoggedEvent } from './records.js'

export class EventLogStore {
  constructor(
    private readonly redis: Redis,
    private readonly keys: RedisKeys,
    /** Every event appended is counted against its tenant's max_event_bytes. */
    private readonly eventBytes: EventBytes,
  ) {}

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

  /**
   * Appends events in order, in one round trip, like appendLive each (`mode`: see AppendMode). `term`: the writer's lease term; throws LeaseLost when the
   * session's lease has passed to another since (nothing is added then).
   */
  async appendLiveMany(
    sid: string,
    eid: string,
    events: Array<{ type: string; [k: string]: unknown }>,
    tenant: string,
    mode: AppendMode = 'plain',
    term = '',
  ): Promise<Appended | null> {
    return this.eventBytes.appendMany(tenant, sid, eid, events, mode, term)
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
