// What a tenant's execution logs hold in Redis, kept within its max_event_bytes: every entry
// appended is counted; past the limit the tenant's oldest ended logs are dropped, then a live log is
// truncated (one `limit` event, then nothing but its status and done). Lua, because several API
// instances append for one tenant at once. Keys: src/store/keys.ts (tenantEventBytes and after).
import type { ChainableCommander, Redis } from 'ioredis'
import type { RedisKeys } from './keys.js'
import { eventJson } from '../event-json.js'
import { PACK_LUA } from './log-packing.js'
import type { LoggedEvent } from './records.js'
import { defineScripts, luaScript, queueScript, runScript } from './scripts.js'

/** What one stream entry costs beyond its JSON (the stream's own bookkeeping, roughly). */
const ENTRY_OVERHEAD_BYTES = 64

// KEYS: 1 the log's stream, 2 the tenant's total, 3 its bytes per log, 4 its ended logs scored by
// when they expire, 5 its logs being truncated (bytes refused since the limit event).
// ARGV: 1 the log ("sid/eid"), 2 the tenant's limit, 3 entries kept per log, 4 the key prefix.
// A log's keys are built here as keys.ts builds them, for ended logs other than the one named.
const PRELUDE = `
local OVERHEAD = ${ENTRY_OVERHEAD_BYTES}
local stream, totalKey, sizesKey, endedKey, truncKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local member, limit, maxlen, prefix = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]

local function total() return tonumber(redis.call('GET', totalKey) or '0') end

local function logKey(m, kind)
  local sid, eid = string.match(m, '^(.-)/(.*)$')
  return prefix .. '{' .. sid .. '}:' .. kind .. ':' .. eid
end

-- Forgets a log's bytes (its keys are gone or about to go).
local function forget(m)
  local n = tonumber(redis.call('HGET', sizesKey, m) or '0')
  redis.call('HDEL', sizesKey, m)
  redis.call('ZREM', endedKey, m)
  redis.call('DECRBY', totalKey, n)
end

-- Drops ended logs, oldest first, until \`need\` more bytes fit; false when they still do not.
local function room(need)
  while total() + need > limit do
    local oldest = redis.call('ZRANGE', endedKey, 0, 0)[1]
    if not oldest then return false end
    redis.call('UNLINK', logKey(oldest, 'events'), logKey(oldest, 'exec'))
    forget(oldest)
  end
  return true
end

-- Appends one entry and counts it; trims the log to maxlen entries exactly, giving their bytes back.
-- What this call added, for the caller to hand to local readers without reading it back: the id
-- the log ended at before (so a reader can tell the entries follow on from what it has), then each
-- entry's id and its JSON ('' for the caller's own event, which it already has).
local added = nil
local function add(payload, own)
  if not added then
    local last = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)[1]
    added = { last and last[1] or '' }
  end
  local id = redis.call('XADD', stream, '*', 'e', payload)
  added[#added + 1] = id
  added[#added + 1] = own and '' or payload
  local n = #payload + OVERHEAD
  local extra = redis.call('XLEN', stream) - maxlen
  if extra > 0 then
    for _, e in ipairs(redis.call('XRANGE', stream, '-', '+', 'COUNT', extra)) do n = n - #e[2][2] - OVERHEAD end
    redis.call('XTRIM', stream, 'MAXLEN', maxlen)
  end
  redis.call('INCRBY', totalKey, n)
  redis.call('HINCRBY', sizesKey, member, n)
  return id
end

local function limitEvent(dropped)
  return '{"type":"limit","what":"tenant_event_bytes","dropped_bytes":' .. dropped .. '}'
end
`

// ARGV: 5 the event's JSON, 6 '1' when it must be kept (status, done: a few bytes each).
// Returns {1 when it was added (0: refused), what was added (see add)}.
const APPEND =
  PRELUDE +
  `
local payload, force = ARGV[5], ARGV[6] == '1'
-- A log that ended and was dropped (or expired) is not brought back.
if redis.call('ZSCORE', endedKey, member) and redis.call('EXISTS', stream) == 0 then return { 0, {} } end
local size = #payload + OVERHEAD
if redis.call('HEXISTS', truncKey, member) == 1 and not force then
  redis.call('HINCRBY', truncKey, member, size)
  return { 0, {} }
end
if room(size) or force then
  add(payload, true)
  return { 1, added }
end
-- Truncation begins: the log gets a limit event and keeps nothing more but its status and done.
redis.call('HSET', truncKey, member, 0)
add(limitEvent(size))
return { 0, added }`

// ARGV: 5 the done event's JSON ('' when the log is another's), 6 when the log expires (ms),
// 7 now (ms), 8 the logs' time to live (ms). The log joins the ended ones (first to be dropped), after
// a limit event counting what was refused since the first one; the oldest ended logs that Redis
// expired meanwhile give their bytes back. Returns what was added (see add).
const END =
  PRELUDE +
  `
local done, expireAt, now, ttl = ARGV[5], ARGV[6], tonumber(ARGV[7]), tonumber(ARGV[8])
local refused = tonumber(redis.call('HGET', truncKey, member) or '-1')
redis.call('HDEL', truncKey, member)
if refused > 0 then
  local e = limitEvent(refused)
  room(#e + OVERHEAD)
  add(e)
end
if done ~= '' then
  room(#done + OVERHEAD)
  add(done, true)
end
if redis.call('HEXISTS', sizesKey, member) == 1 then redis.call('ZADD', endedKey, expireAt, member) end
for _, m in ipairs(redis.call('ZRANGE', endedKey, '-inf', now, 'BYSCORE', 'LIMIT', 0, 16)) do
  local key = logKey(m, 'events')
  if redis.call('EXISTS', key) == 0 then key = logKey(m, 'exec') end -- packed into its record (log-packing.ts)
  local at = redis.call('PEXPIRETIME', key)
  if at == -2 then forget(m)
  elseif at == -1 then
    redis.call('PEXPIREAT', key, now + ttl)
    redis.call('ZADD', endedKey, now + ttl, m)
  else redis.call('ZADD', endedKey, at, m) end -- it lives longer than its end said (its session was deleted)
end
return added or {}`

// A session lists its latest executions (for GET .../executions); the ones it lists no more are
// kept in a set scored by when their logs have expired at the latest, so that deleting the session
// finds every log it had.
const TRIM_LIST = 'trimList'
const TRIM_LIST_LUA = `
local function ${TRIM_LIST}(list, older, keep, expireAt, now)
  for _, id in ipairs(redis.call('LRANGE', list, keep, -1)) do redis.call('ZADD', older, expireAt, id) end
  redis.call('LTRIM', list, 0, keep - 1)
  redis.call('ZREMRANGEBYSCORE', older, '-inf', now)
end
`
/** The same, alone. KEYS: 1 the list, 2 the older set. ARGV: 1 kept, 2 expiry of those trimmed (ms), 3 now (ms). */
export const TRIM_EXECUTIONS = luaScript('trim_executions', 2, TRIM_LIST_LUA + `${TRIM_LIST}(KEYS[1], KEYS[2], tonumber(ARGV[1]), ARGV[2], ARGV[3])`)

// Queues a new execution in one round trip: checks its session (there, the tenant's, alive), takes
// one of the tenant's running slots (as ACQUIRE_SLOT in session-scripts.ts does), records the execution and
// logs its first event. KEYS: 6 the tenant's running slots, 7 the execution, 8 the session's
// executions, 9 its unfinished ones, 10 the session, 11 its older executions. ARGV: 5 the first
// event's JSON ('' none), 6 now (ms), 7 the tenant's cap, 8 when the slot frees itself (ms), 9 the
// execution id, 10 executions listed per session, 11 the tenant, 12 when the logs of executions
// listed no more have expired at the latest (ms), 13... the record's fields and values.
// The session's latest two earlier executions, once ended, have their logs packed (log-packing.ts).
// Returns {1, added}, {0}: no slot, {-1}: no such session, {-2, why}: the session is dead.
const START =
  PRELUDE +
  TRIM_LIST_LUA +
  PACK_LUA +
  `
local running, exec, list, unfinished, session, older = KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11]
local s = redis.call('HMGET', session, 'tenant', 'status', 'status_detail')
if s[1] ~= ARGV[11] then return { -1 } end
if s[2] == 'dead' then return { -2, s[3] or '' } end
redis.call('ZREMRANGEBYSCORE', running, '-inf', ARGV[6])
if redis.call('ZCARD', running) >= tonumber(ARGV[7]) then return { 0 } end
redis.call('ZADD', running, ARGV[8], ARGV[9])
redis.call('PEXPIREAT', running, math.ceil(tonumber(redis.call('ZRANGE', running, 0, 0, 'REV', 'WITHSCORES')[2])))
for i = 13, #ARGV, 2 do redis.call('HSET', exec, ARGV[i], ARGV[i + 1]) end
local sid = string.match(member, '^(.-)/')
for _, id in ipairs(redis.call('LRANGE', list, 0, 1)) do pack(sid .. '/' .. id) end
redis.call('LPUSH', list, ARGV[9])
${TRIM_LIST}(list, older, tonumber(ARGV[10]), ARGV[12], ARGV[6])
redis.call('SADD', unfinished, ARGV[9])
if ARGV[5] ~= '' then add(ARGV[5], true) end
return { 1, added or {} }`

// Drops the logs (and execution records) of a deleted session and gives their bytes back.
// ARGV: 5... the logs ("sid/eid").
const DROP =
  PRELUDE +
  `
for i = 5, #ARGV do
  redis.call('UNLINK', logKey(ARGV[i], 'events'), logKey(ARGV[i], 'exec'))
  forget(ARGV[i])
end
return 1`

const APPEND_SCRIPT = luaScript('append_event', 5, APPEND)
const DROP_SCRIPT = luaScript('drop_logs', 5, DROP)
const START_SCRIPT = luaScript('start_execution', 11, START)
const END_SCRIPT = luaScript('end_log', 5, END)

/**
 * Entries a call added to a log, in order: `prev` is the id the log ended at before them ('' when it
 * was empty), so a reader that has read up to `prev` can take them as they are.
 */
export interface Appended {
  prev: string
  events: LoggedEvent[]
  /** Their JSON's length. */
  bytes: number
}

/** The added part of a script's reply: prev, then id and JSON pairs ('' stands for `own`, the caller's event). */
function appended(raw: unknown, own: { event: object; json: string } | null): Appended | null {
  if (!Array.isArray(raw) || raw.length === 0) return null
  const [prev, ...rest] = raw as string[]
  const events: LoggedEvent[] = []
  let bytes = 0
  for (let i = 0; i + 1 < rest.length; i += 2) {
    const id = rest[i]!
    const json = rest[i + 1]!
    const mine = json === '' && own
    events.push({ ...(mine ? own.event : (JSON.parse(json) as object)), id } as LoggedEvent)
    bytes += mine ? own.json.length : json.length
  }
  return { prev: prev ?? '', events, bytes }
}

function own(event: object | null, json: string): { event: object; json: string } | null {
  return event ? { event, json } : null
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

  private args(tenant: string, sid: string, eid: string): string[] {
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
    ]
  }

  /**
   * Appends one event; resolves with its id (null when the tenant's budget refused it; `force`: never
   * refused) and what was added (a refusal may add a `limit` event).
   */
  async append(tenant: string, sid: string, eid: string, event: object, force = false): Promise<{ id: string | null; added: Appended | null }> {
    const json = eventJson(event)
    const [ok, raw] = (await runScript(this.redis, APPEND_SCRIPT, ...this.args(tenant, sid, eid), json, force ? '1' : '0')) as [number, unknown]
    const added = appended(raw, own(event, json))
    return { id: ok === 1 ? (added?.events.at(-1)?.id ?? null) : null, added }
  }

  /**
   * Checks the session, takes a running slot and records the execution with its first event (null:
   * it logs elsewhere), in one round trip; see START.
   */
  async start(
    rec: { id: string; session_id: string; tenant: string },
    fields: Record<string, string>,
    first: object | null,
    slot: { max: number; untilMs: number; keepPerSession: number },
  ): Promise<{ result: 'started'; added: Appended | null } | { result: 'no_slot' | 'no_session' } | { result: 'dead'; why: string }> {
    const k = this.keys
    const json = first ? JSON.stringify(first) : ''
    const log = this.args(rec.tenant, rec.session_id, rec.id)
    const now = Date.now()
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
      ...log.slice(5),
      json,
      String(now),
      String(slot.max),
      String(Math.ceil(slot.untilMs)),
      rec.id,
      String(slot.keepPerSession),
      rec.tenant,
      String(now + this.opts.ttlS * 1000),
      ...Object.entries(fields).flat(),
    )) as [number, unknown]
    if (code === 1) return { result: 'started', added: appended(extra, own(first, json)) }
    if (code === -2) return { result: 'dead', why: typeof extra === 'string' ? extra : '' }
    return { result: code === 0 ? 'no_slot' : 'no_session' }
  }

  /** As part of a MULTI: drops a session's logs and execution records, and counts their bytes no more. */
  dropIn(m: ChainableCommander, tenant: string, sid: string, eids: string[]): void {
    if (eids.length === 0) return
    queueScript(m, DROP_SCRIPT, ...this.args(tenant, sid, eids[0]!), ...eids.map((eid) => `${sid}/${eid}`))
  }

  /** The same append (forced) as part of a MULTI; `parseAppend` reads its reply. */
  appendIn(m: ChainableCommander, tenant: string, sid: string, eid: string, event: object): void {
    queueScript(m, APPEND_SCRIPT, ...this.args(tenant, sid, eid), JSON.stringify(event), '1')
  }

  /** As part of a MULTI that ends the log (and sets its expiry): its last events, then it joins the tenant's ended logs; `parseEnd` reads its reply. */
  endIn(m: ChainableCommander, tenant: string, sid: string, eid: string, done: object | null): void {
    const now = Date.now()
    const ttlMs = this.opts.ttlS * 1000
    queueScript(m, END_SCRIPT, ...this.args(tenant, sid, eid), done ? JSON.stringify(done) : '', String(now + ttlMs), String(now), String(ttlMs))
  }
}

/** What an appendIn added, from its reply in the MULTI's results. */
export function parseAppend(reply: unknown, event: object): Appended | null {
  return Array.isArray(reply) ? appended(reply[1], own(event, JSON.stringify(event))) : null
}

/** What an endIn added, from its reply in the MULTI's results. */
export function parseEnd(reply: unknown, done: object | null): Appended | null {
  return appended(reply, own(done, done ? JSON.stringify(done) : ''))
}
