// The Lua behind event-bytes.ts: what a tenant's execution logs hold in Redis, kept within its
// max_event_bytes, and an execution's start and end around its log. Lua, because several API
// instances append for one tenant at once. Keys: src/store/keys.ts (tenantEventBytes and after).
import { PACK_LUA } from './log-packing.js'
import { luaScript } from './scripts.js'

/** What one stream entry costs beyond its JSON (the stream's own bookkeeping, roughly). */
const ENTRY_OVERHEAD_BYTES = 64

// KEYS: 1 the log's stream, 2 the tenant's total, 3 its bytes per log, 4 its ended logs scored by
// when they expire, 5 its logs being truncated (bytes refused since the limit event).
// ARGV: 1 the log ("sid/eid"), 2 the tenant's limit, 3 entries kept per log, 4 the key prefix,
// 5 the writer's lease term ('' none: see fenced).
// A log's keys are built here as keys.ts builds them, for ended logs other than the one named, and
// for the lease term of the log's session.
export const PRELUDE = `
local OVERHEAD = ${ENTRY_OVERHEAD_BYTES}
local stream, totalKey, sizesKey, endedKey, truncKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local member, limit, maxlen, prefix, term = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4], ARGV[5]

-- Whether the write must be refused: it carries the term under which its instance took the
-- session's lease, and the lease has passed to another holder since (lease-store.ts). Checked
-- before anything is written, so an instance that lost the session while paused writes nothing more.
local function fenced()
  if term == '' then return false end
  return redis.call('GET', prefix .. '{' .. string.match(member, '^(.-)/') .. '}:lease-term') ~= term
end

-- What this script knows of the tenant's total, of this log's length and of its truncation, read
-- from Redis once at most and kept up to date by every change the script makes. Bytes this script
-- added to the log are counted in Redis once, at its end or before a log is dropped (settle).
local totalNow, lengthNow, truncRead, truncNow, unsettled = nil, nil, false, nil, 0
local function total()
  if not totalNow then totalNow = tonumber(redis.call('GET', totalKey) or '0') end
  return totalNow + unsettled
end
local function settle()
  if unsettled == 0 then return end
  totalNow = redis.call('INCRBY', totalKey, unsettled)
  redis.call('HINCRBY', sizesKey, member, unsettled)
  unsettled = 0
end
-- Bytes refused since the log's limit event; nil when it is not truncated.
local function refusedSoFar()
  if not truncRead then
    truncNow, truncRead = tonumber(redis.call('HGET', truncKey, member)), true
  end
  return truncNow
end

local function logKey(m, kind)
  local sid, eid = string.match(m, '^(.-)/(.*)$')
  return prefix .. '{' .. sid .. '}:' .. kind .. ':' .. eid
end

-- Forgets a log's bytes (its keys are gone or about to go).
local function forget(m)
  local n = tonumber(redis.call('HGET', sizesKey, m) or '0')
  redis.call('HDEL', sizesKey, m)
  redis.call('ZREM', endedKey, m)
  totalNow = redis.call('DECRBY', totalKey, n)
end

-- Drops ended logs, oldest first, until \`need\` more bytes fit; false when they still do not.
local function room(need)
  while total() + need > limit do
    local oldest = redis.call('ZRANGE', endedKey, 0, 0)[1]
    if not oldest then return false end
    settle() -- the log dropped may be this one: its bytes so far go with it
    redis.call('UNLINK', logKey(oldest, 'events'), logKey(oldest, 'exec'))
    forget(oldest)
    if oldest == member then lengthNow = nil end
  end
  return true
end

-- Appends one entry and counts it; trims the log to maxlen entries exactly, giving their bytes back.
-- What this call added, for the caller to hand to local readers without reading it back: the id
-- the log ended at before (so a reader can tell the entries follow on from what it has), then each
-- entry's id and its JSON, or for an event of the caller's own (it has them already) its \`mark\`:
-- '' for the call's one event (a status, a done), '@n' for the n-th of its events.
-- A log's first entry gets its id from the clock; each one after it the id after the last one's
-- (same milliseconds, sequence + 1), so a writer that knows where the log ends knows the ids of
-- what it appends (nextId in event-bytes.ts). A call with \`jump\` set gives its first entry the next
-- millisecond instead: past every id a former holder may have handed to its readers ahead of a write
-- that never reached Redis (it died in between), as those all share the log's milliseconds.
local added, jump = nil, false
local function add(payload, mark)
  if not added then
    local last = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)[1]
    added = { last and last[1] or '' }
  end
  local ms, seq = string.match(added[#added - 1] or added[1], '^(%d+)-(%d+)$')
  if jump and ms then ms, seq, jump = string.format('%d', tonumber(ms) + 1), -1, false end
  local id = redis.call('XADD', stream, ms and ms .. '-' .. (tonumber(seq) + 1) or '*', 'e', payload)
  added[#added + 1] = id
  added[#added + 1] = mark or payload
  local n = #payload + OVERHEAD
  lengthNow = lengthNow and lengthNow + 1 or redis.call('XLEN', stream)
  local extra = lengthNow - maxlen
  if extra > 0 then
    for _, e in ipairs(redis.call('XRANGE', stream, '-', '+', 'COUNT', extra)) do n = n - #e[2][2] - OVERHEAD end
    redis.call('XTRIM', stream, 'MAXLEN', maxlen)
    lengthNow = maxlen
  end
  unsettled = unsettled + n
  return id
end

local function limitEvent(dropped)
  return '{"type":"limit","what":"tenant_event_bytes","dropped_bytes":' .. dropped .. '}'
end

-- Appends one event of the caller's (\`mark\`, see add) within the tenant's budget; true when it was
-- added. Past the budget (\`force\`: small events that must be kept, never refused) the log is
-- truncated: it gets a limit event and keeps nothing more but its status and done.
local function appendOwn(payload, mark, force)
  local size = #payload + OVERHEAD
  if refusedSoFar() and not force then
    truncNow = redis.call('HINCRBY', truncKey, member, size)
    return false
  end
  if room(size) or force then
    add(payload, mark)
    return true
  end
  redis.call('HSET', truncKey, member, 0)
  truncNow = 0
  add(limitEvent(size))
  return false
end
`

// Appends events in order (an execution's output that arrived together, in one round trip).
// ARGV: 6 '1' when they must be kept (a status; output already handed to readers, see appendedAhead in
// event-bytes.ts: small), 'j' when their ids jump (see add), else '0'; 7... the events' JSON.
// Returns {how many were added (the rest were refused), what was added (see add; the n-th event is '@n')};
// {-1}: fenced, nothing added.
const APPEND =
  PRELUDE +
  `
if fenced() then return { -1 } end
local force, kept = ARGV[6] == '1', 0
jump = ARGV[6] == 'j'
-- A log that ended and was dropped (or expired) is not brought back.
if redis.call('ZSCORE', endedKey, member) and redis.call('EXISTS', stream) == 0 then return { 0, {} } end
for i = 7, #ARGV do
  if appendOwn(ARGV[i], '@' .. (i - 6), force) then kept = kept + 1 end
end
settle()
return { kept, added or {} }`

// Ends an execution in one round trip. Its log: the log joins the ended ones (first to be dropped),
// after a limit event counting what was refused since the first one, and its done event; the oldest
// ended logs that Redis expired meanwhile give their bytes back. Its record: its end's fields, less
// what re-queues it after a restart (code, kind, timeout_ms: see ExecutionRecord), expiring with its
// log; its running slot and its place among the session's unfinished executions are freed. Its
// session, unless it is gone or dead: its fields, and its idle deadline, as SESSION_ACTIVITY does.
// KEYS: 6 the execution's record, 7 the tenant's running slots, 8 the session's unfinished
// executions, 9 the session, 10 the idle deadlines.
// ARGV: 6 the done event's JSON ('' when the log is another's), 7 when the log expires (ms),
// 8 now (ms), 9 the logs' time to live (ms), 10 the execution id, 11 the session's idle deadline
// ('': the session is left as it is), 12 how many of the record's fields and values follow the
// events, 13 how many events come before the done (output that arrived with it, as APPEND appends
// them), 14 the id the caller expects the done to get ('' none: see below), then those events, the
// record's fields and values, and the session's. Returns what was added to the log (see add: the
// done is '', the n-th event before it '@n'); -1: fenced, nothing written.
// A caller that expects an id has handed the end to its readers already (execution-log.ts): the
// events before the done are kept whatever the tenant's budget (they are small), and a log that
// already holds that id (this call ran, and its reply was lost) gets nothing more.
const END =
  PRELUDE +
  `
if fenced() then return -1 end
local done, expireAt, now, ttl = ARGV[6], ARGV[7], tonumber(ARGV[8]), tonumber(ARGV[9])
local exec, running, unfinished, session, deadlines = KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10]
local eid, sessionDeadline, n, before = ARGV[10], ARGV[11], tonumber(ARGV[12]), tonumber(ARGV[13])
local expected = ARGV[14]
local fieldsAt = 15 + before
if expected == '' or #redis.call('XRANGE', stream, expected, '+', 'COUNT', 1) == 0 then
  for i = 1, before do appendOwn(ARGV[14 + i], '@' .. i, expected ~= '') end
  local refused = refusedSoFar() or -1
  if refused >= 0 then
    redis.call('HDEL', truncKey, member)
    truncNow = nil
  end
  if refused > 0 then
    local e = limitEvent(refused)
    room(#e + OVERHEAD)
    add(e)
  end
  if done ~= '' then
    room(#done + OVERHEAD)
    add(done, '')
  end
  settle()
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
redis.call('HSET', exec, unpack(ARGV, fieldsAt, fieldsAt + n - 1))
redis.call('HDEL', exec, 'code', 'kind', 'timeout_ms')
redis.call('PEXPIRE', exec, ttl)
redis.call('PEXPIRE', stream, ttl)
redis.call('ZREM', running, eid)
redis.call('SREM', unfinished, eid)
if sessionDeadline ~= '' then
  local st = redis.call('HGET', session, 'status')
  if st and st ~= 'dead' then
    redis.call('HSET', session, unpack(ARGV, fieldsAt + n))
    redis.call('ZADD', deadlines, sessionDeadline, string.match(member, '^(.-)/'))
  end
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
// executions, 9 its unfinished ones, 10 the session, 11 its older executions, 12 the idle deadlines.
// ARGV: 6 the first event's JSON ('' none), 7 now (ms), 8 the tenant's cap, 9 when the slot frees
// itself (ms), 10 the execution id, 11 executions listed per session, 12 the tenant, 13 when the logs
// of executions listed no more have expired at the latest (ms), 14 the session's idle deadline when
// the execution starts at once ('' when it waits: its start is recorded when it starts; otherwise
// the session becomes busy here, as SESSION_ACTIVITY would make it), 15... the record's fields and values.
// The session's latest two earlier executions, once ended, have their logs packed (log-packing.ts).
// Returns {1, added}, {0}: no slot, {-1}: no such session, {-2, why}: the session is dead, {-3}: fenced.
const START =
  PRELUDE +
  TRIM_LIST_LUA +
  PACK_LUA +
  `
local running, exec, list, unfinished, session, older, deadlines = KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11], KEYS[12]
local s = redis.call('HMGET', session, 'tenant', 'status', 'status_detail')
if s[1] ~= ARGV[12] then return { -1 } end
if s[2] == 'dead' then return { -2, s[3] or '' } end
if fenced() then return { -3 } end
redis.call('ZREMRANGEBYSCORE', running, '-inf', ARGV[7])
if redis.call('ZCARD', running) >= tonumber(ARGV[8]) then return { 0 } end
redis.call('ZADD', running, ARGV[9], ARGV[10])
redis.call('PEXPIREAT', running, math.ceil(tonumber(redis.call('ZRANGE', running, 0, 0, 'REV', 'WITHSCORES')[2])))
redis.call('HSET', exec, unpack(ARGV, 15))
local sid = string.match(member, '^(.-)/')
if ARGV[14] ~= '' then
  redis.call('HSET', session, 'status', 'busy', 'last_active_at', ARGV[7])
  redis.call('ZADD', deadlines, ARGV[14], sid)
end
for _, id in ipairs(redis.call('LRANGE', list, 0, 1)) do pack(sid .. '/' .. id) end
-- Trimmed (and its older ones' expired ids dropped) once it lists more than it keeps.
if redis.call('LPUSH', list, ARGV[10]) > tonumber(ARGV[11]) then ${TRIM_LIST}(list, older, tonumber(ARGV[11]), ARGV[13], ARGV[7]) end
redis.call('SADD', unfinished, ARGV[10])
-- The execution is new, so is its log: nothing to look up before its first entry.
if ARGV[6] ~= '' then
  added, lengthNow = { '' }, 0
  add(ARGV[6], '')
  settle()
end
return { 1, added or {} }`

// Drops the logs (and execution records) of a deleted session and gives their bytes back.
// ARGV: 6... the logs ("sid/eid").
const DROP =
  PRELUDE +
  `
for i = 6, #ARGV do
  redis.call('UNLINK', logKey(ARGV[i], 'events'), logKey(ARGV[i], 'exec'))
  forget(ARGV[i])
end
return 1`

export const APPEND_SCRIPT = luaScript('append_event', 5, APPEND)
export const DROP_SCRIPT = luaScript('drop_logs', 5, DROP)
export const START_SCRIPT = luaScript('start_execution', 12, START)
export const END_SCRIPT = luaScript('end_execution', 10, END)
