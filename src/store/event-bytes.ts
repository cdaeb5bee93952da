// What a tenant's execution logs hold in Redis, kept within its max_event_bytes: every entry
// appended is counted; past the limit the tenant's oldest ended logs are dropped, then a live log is
// truncated (one `limit` event, then nothing but its status and done). Lua, because several API
// instances append for one tenant at once. Keys: src/store/keys.ts (tenantEventBytes and after).
import type { ChainableCommander, Redis } from 'ioredis'
import type { RedisKeys } from './keys.js'

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
local function add(payload)
  local id = redis.call('XADD', stream, '*', 'e', payload)
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
// Returns its stream id, or nil when it was refused.
const APPEND =
  PRELUDE +
  `
local payload, force = ARGV[5], ARGV[6] == '1'
-- A log that ended and was dropped (or expired) is not brought back.
if redis.call('ZSCORE', endedKey, member) and redis.call('EXISTS', stream) == 0 then return false end
local size = #payload + OVERHEAD
if redis.call('HEXISTS', truncKey, member) == 1 and not force then
  redis.call('HINCRBY', truncKey, member, size)
  return false
end
if room(size) or force then return add(payload) end
-- Truncation begins: the log gets a limit event and keeps nothing more but its status and done.
redis.call('HSET', truncKey, member, 0)
add(limitEvent(size))
return false`

// ARGV: 5 the done event's JSON ('' when the log is another's), 6 when the log expires (ms),
// 7 now (ms), 8 the logs' time to live (ms). The log joins the ended ones (first to be dropped), after
// a limit event counting what was refused since the first one; the oldest ended logs that Redis
// expired meanwhile give their bytes back.
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
  add(done)
end
if redis.call('HEXISTS', sizesKey, member) == 1 then redis.call('ZADD', endedKey, expireAt, member) end
for _, m in ipairs(redis.call('ZRANGE', endedKey, '-inf', now, 'BYSCORE', 'LIMIT', 0, 16)) do
  local key = logKey(m, 'events')
  local at = redis.call('PEXPIRETIME', key)
  if at == -2 then forget(m)
  elseif at == -1 then
    redis.call('PEXPIREAT', key, now + ttl)
    redis.call('ZADD', endedKey, now + ttl, m)
  else redis.call('ZADD', endedKey, at, m) end -- it lives longer than its end said (its session was deleted)
end
return 1`

/** Appends and ends event logs, counting their bytes against the tenant's max_event_bytes. */
export class EventBytes {
  constructor(
    private readonly redis: Redis,
    private readonly keys: RedisKeys,
    private readonly opts: { prefix: string; maxLen: number; ttlS: number; limitFor: (tenant: string) => number },
  ) {}

  private args(tenant: string, sid: string, eid: string): [number, ...string[]] {
    const k = this.keys
    return [
      5,
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

  /** Appends one event; resolves with its id, or null when the tenant's budget refused it (`force`: never refused). */
  async append(tenant: string, sid: string, eid: string, event: object, force = false): Promise<string | null> {
    return (await this.redis.eval(APPEND, ...this.args(tenant, sid, eid), JSON.stringify(event), force ? '1' : '0')) as string | null
  }

  /** The same append (forced) as part of a MULTI. */
  appendIn(m: ChainableCommander, tenant: string, sid: string, eid: string, event: object): void {
    m.eval(APPEND, ...this.args(tenant, sid, eid), JSON.stringify(event), '1')
  }

  /** As part of a MULTI that ends the log (and sets its expiry): its last events, then it joins the tenant's ended logs. */
  endIn(m: ChainableCommander, tenant: string, sid: string, eid: string, done: object | null): void {
    const now = Date.now()
    const ttlMs = this.opts.ttlS * 1000
    m.eval(END, ...this.args(tenant, sid, eid), done ? JSON.stringify(done) : '', String(now + ttlMs), String(now), String(ttlMs))
  }
}
