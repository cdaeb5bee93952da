// The Lua scripts of the session, lease and quota stores (session-store.ts, lease-store.ts,
// quota-store.ts; SESSION_ACTIVITY: an execution's start, execution-store.ts): each runs atomically
// in Redis, sent once per connection and then called by its SHA1 (scripts.ts).
import { luaScript } from './scripts.js'

// Claims due ids atomically with a lease: their deadline moves to the end of the claim (ARGV[3]),
// so no other instance takes them meanwhile, and one that dies mid-batch loses nothing: when the
// claim lapses they are due again. The work removes or moves them when done (SETTLE_CLAIM).
export const CLAIM_DUE = luaScript(
  'claim_due',
  1,
  `
local ids = redis.call('ZRANGE', KEYS[1], '-inf', ARGV[1], 'BYSCORE', 'LIMIT', 0, tonumber(ARGV[2]))
for _, id in ipairs(ids) do redis.call('ZADD', KEYS[1], ARGV[3], id) end
return ids`,
)

// Ends a claim: the new deadline replaces the claim's, unless something moved it meanwhile (the
// session was used, or deleted), which then stands.
export const SETTLE_CLAIM = luaScript(
  'settle_claim',
  1,
  `
if redis.call('ZSCORE', KEYS[1], ARGV[1]) == ARGV[2] then redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1]) return 1 end
return 0`,
)

// Leases. KEYS[1] the lease (the holder's instance id, expiring unless renewed), KEYS[2] its term.
// A lease that passes to another holder, or is taken while free, starts a new term: writes that
// carry an earlier term are refused from then on (FENCE_LUA), so an instance that lost a session
// while it was paused can no longer write for it. A holder that takes its own lease again keeps its term.
const NEW_TERM_LUA = `
local function takeFor(me, ttl)
  local cur = redis.call('GET', KEYS[1])
  redis.call('SET', KEYS[1], me, 'PX', ttl)
  local term = cur == me and redis.call('GET', KEYS[2])
  if not term then term = tostring(redis.call('INCR', KEYS[2])) end
  return { me, term }
end
`

// Sets the lease when free or already ours. Returns {holder, term} ({holder, ''} when another holds it).
// ARGV: 1 this instance, 2 ttl (ms).
export const ACQUIRE_LEASE = luaScript(
  'acquire_lease',
  2,
  NEW_TERM_LUA +
    `
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[1] then return { cur, '' } end
return takeFor(ARGV[1], tonumber(ARGV[2]))`,
)

// Takes the lease when it is free, ours, or held by ARGV[2] while that instance's heartbeat
// (KEYS[3]) is gone: an instance that came back in the meantime keeps its sessions. Exactly one of
// several instances racing for it wins. Returns as ACQUIRE_LEASE. ARGV: 1 this instance, 2 the
// instance that is gone ('' none), 3 ttl (ms).
export const TAKE_LEASE = luaScript(
  'take_lease',
  3,
  NEW_TERM_LUA +
    `
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[1] and not (cur == ARGV[2] and redis.call('EXISTS', KEYS[3]) == 0) then return { cur, '' } end
return takeFor(ARGV[1], tonumber(ARGV[3]))`,
)

// Renews a lease of ours for another ttl while its term is ARGV[3] ('' any: a session still being
// made), also when it lapsed meanwhile (Redis was away) and nobody took it since. Returns the holder:
// ARGV[1] when renewed, else another instance, or '' (lapsed and taken since, or another term).
// ARGV: 1 this instance, 2 ttl (ms), 3 the term.
export const RENEW_LEASE = luaScript(
  'renew_lease',
  2,
  `
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[1] then return cur end
if ARGV[3] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[3] then return '' end
redis.call('SET', KEYS[1], ARGV[1], 'PX', tonumber(ARGV[2]))
return ARGV[1]`,
)

// Deletes the lease if it is still ARGV[1]'s.
export const RELEASE_LEASE = luaScript(
  'release_lease',
  1,
  `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`,
)

// A tenant's executions that are queued or running: a sorted set of ids scored by the time by
// which each must have ended, so an id left behind by a crashed instance frees itself.
// Adds the id only while fewer than the cap are live; returns 1 on success. The set expires with
// its latest member, never its newest: a short execution must not take the long ones' slots with it.
export const ACQUIRE_SLOT = luaScript(
  'acquire_slot',
  1,
  `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[4])
redis.call('PEXPIREAT', KEYS[1], math.ceil(tonumber(redis.call('ZRANGE', KEYS[1], 0, 0, 'REV', 'WITHSCORES')[2])))
return 1`,
)

// Creates a session only while the tenant has fewer than the cap; returns 1 on success.
export const CREATE_SESSION = luaScript(
  'create_session',
  3,
  `
if redis.call('SCARD', KEYS[2]) >= tonumber(ARGV[1]) then return 0 end
for i = 4, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('SADD', KEYS[2], ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[3])
return 1`,
)

// Sets fields of a session that exists (never brings a deleted one back, even for an instant).
export const UPDATE_SESSION = luaScript(
  'update_session',
  1,
  `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV))
return 1`,
)

// Updates a live session (never a deleted or dead one) and moves its idle deadline, atomically.
export const SESSION_ACTIVITY = luaScript(
  'session_activity',
  2,
  `
local st = redis.call('HGET', KEYS[1], 'status')
if (not st) or st == 'dead' then return 0 end
for i = 3, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('ZADD', KEYS[2], ARGV[1], ARGV[2])
return 1`,
)

// Hibernation. KEYS[1] the session, KEYS[2] the tenant's sessions, KEYS[3] its hibernated sessions.
// Reserves a place among the tenant's hibernated sessions (ARGV[1] the session, ARGV[2] the maximum):
// 1 reserved (or already there), 0 none left.
export const RESERVE_HIBERNATION = luaScript(
  'reserve_hibernation',
  3,
  `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('SISMEMBER', KEYS[3], ARGV[1]) == 1 then return 1 end
if redis.call('SCARD', KEYS[3]) >= tonumber(ARGV[2]) then return 0 end
redis.call('SADD', KEYS[3], ARGV[1])
return 1`,
)

// The checkpoint is on disk: the session is hibernated (fields ARGV[3..]), leaves the tenant's live
// sessions and is due at ARGV[2] (KEYS[4] the deadlines). 0 when it was deleted meanwhile.
export const HIBERNATED = luaScript(
  'hibernated',
  4,
  `
if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('SREM', KEYS[3], ARGV[1]) return 0 end
for i = 3, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('SREM', KEYS[2], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[1])
redis.call('ZADD', KEYS[4], ARGV[2], ARGV[1])
return 1`,
)

// Before a wake: the hibernated session takes a place among the tenant's live sessions (ARGV[2] the
// maximum) and leaves the hibernated ones; it stays "hibernated" until its sandbox runs. 1 done (or
// done already by a wake cut short), 0 it is not hibernated, -1 no place left.
export const WAKE_PLACE = luaScript(
  'wake_place',
  3,
  `
if redis.call('HGET', KEYS[1], 'status') ~= 'hibernated' then return 0 end
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 0 then
  if redis.call('SCARD', KEYS[2]) >= tonumber(ARGV[2]) then return -1 end
  redis.call('SADD', KEYS[2], ARGV[1])
end
redis.call('SREM', KEYS[3], ARGV[1])
return 1`,
)
