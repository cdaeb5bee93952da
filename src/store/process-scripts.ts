// The Lua behind process-store.ts: a background process recorded in one round trip that checks
// its session and the session's max_processes. Its output log is appended and ended by the scripts
// of log-scripts.ts, as an execution's is (their PRELUDE gives this one the log bookkeeping too).
import { PRELUDE } from './log-scripts.js'
import { luaScript } from './scripts.js'

// Records a new process: checks its session (there, the tenant's, not dead), the writer's lease
// term and the session's running processes, records it as running, and counts it as activity of
// the session (last_active_at, its idle deadline). A session lists at most `keep` processes: the
// oldest exited ones beyond are forgotten with their logs (their bytes given back to the tenant).
// KEYS: 1-5 as PRELUDE (for the new process's log), 6 the session, 7 its processes (scored by
// start), 8 its running ones, 9 the new record, 10 the idle deadlines.
// ARGV: 1-5 as PRELUDE (the log is "sid/pid"), 6 the tenant, 7 the most processes running at once,
// 8 now (ms), 9 processes listed per session, 10 the session's idle deadline (ms), 11... the record's fields and values.
// Returns {1}: recorded, {0}: too many running, {-1}: no such session, {-2, why}: dead, {-3}: fenced.
const START =
  PRELUDE +
  `
local session, procs, running, record, deadlines = KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10]
local sid, pid = string.match(member, '^(.-)/(.*)$')
local s = redis.call('HMGET', session, 'tenant', 'status', 'status_detail')
if s[1] ~= ARGV[6] then return { -1 } end
if s[2] == 'dead' then return { -2, s[3] or '' } end
if fenced() then return { -3 } end
if redis.call('SCARD', running) >= tonumber(ARGV[7]) then return { 0 } end
redis.call('HSET', record, unpack(ARGV, 11))
redis.call('ZADD', procs, ARGV[8], pid)
redis.call('SADD', running, pid)
redis.call('HSET', session, 'last_active_at', ARGV[8])
redis.call('ZADD', deadlines, ARGV[10], sid)
local over = redis.call('ZCARD', procs) - tonumber(ARGV[9])
if over > 0 then
  for _, old in ipairs(redis.call('ZRANGE', procs, 0, over - 1)) do
    if redis.call('SISMEMBER', running, old) == 0 then
      redis.call('ZREM', procs, old)
      redis.call('UNLINK', prefix .. '{' .. sid .. '}:process:' .. old, logKey(sid .. '/' .. old, 'events'))
      forget(sid .. '/' .. old)
    end
  end
end
return { 1 }`

export const START_PROCESS = luaScript('start_process', 10, START)
