// Small ended logs are packed into their execution's record: a Redis stream costs about 1.2 kB even
// for the three events of a print(1) (its node is preallocated), the same events as one field of the
// record's hash about 250 bytes. A log is packed when the next execution of its session starts (so
// never while a reader may still block on its stream for the `done`), keeps its entry ids (readers and
// Last-Event-ID go on as before), and its bytes stay counted against the tenant's max_event_bytes.
//
// Packed form: the record's field `log`, "id\njson\nid\njson..." (JSON never holds a raw newline),
// each id after the first with its milliseconds as the difference from the one before ("3-0" is 3 ms
// later, sequence 0): they are most of a small log's bytes otherwise.

/** The record's field that holds a packed log. */
export const PACKED_FIELD = 'log'
/**
 * Logs whose packed form is longer stay streams: the same number is Redis's hash-max-listpack-value in
 * scripts/redis.conf, so a record with its log stays a compact listpack.
 */
const PACK_MAX_BYTES = 1024
/** Logs with more entries stay streams. */
const PACK_MAX_ENTRIES = 16

/**
 * Lua: `pack(m)` packs log `m` ("sid/eid") when it has ended (it is among the tenant's ended logs),
 * its record lives (it expires with it) and it is small. Needs the PRELUDE of log-scripts.ts (logKey, endedKey).
 */
export const PACK_LUA = `
local function pack(m)
  local stream, exec = logKey(m, 'events'), logKey(m, 'exec')
  -- An empty (or gone) stream first: the log the last start packed is the usual one asked again.
  local n = redis.call('XLEN', stream)
  if n == 0 or n > ${PACK_MAX_ENTRIES} or not redis.call('ZSCORE', endedKey, m) or redis.call('PTTL', exec) <= 0 then return end
  local parts, size, prev = {}, 0, nil
  for _, e in ipairs(redis.call('XRANGE', stream, '-', '+')) do
    local json = e[2][2]
    local ms, seq = string.match(e[1], '^(%d+)-(%d+)$')
    local id = prev and string.format('%d-%s', tonumber(ms) - prev, seq) or e[1]
    prev = tonumber(ms)
    size = size + #id + #json + 2
    if size > ${PACK_MAX_BYTES} or string.find(json, '\\n', 1, true) then return end
    parts[#parts + 1] = id
    parts[#parts + 1] = json
  end
  redis.call('HSET', exec, '${PACKED_FIELD}', table.concat(parts, '\\n'))
  redis.call('DEL', stream)
end
`

/**
 * Lua: `packedAfter(exec, after)` the entries of the packed log in record `exec` after id `after`
 * (nil: from the start) as XRANGE gives them ({id, {'e', json}}); nil when it has none packed.
 */
export const PACKED_READ_LUA = `
local function idOf(s)
  local ms, seq = string.match(s, '^(%d+)-(%d+)$')
  if not ms then error('Invalid stream ID specified as stream command argument') end
  return { tonumber(ms), tonumber(seq) }
end
local function packedAfter(exec, after)
  local packed = redis.call('HGET', exec, '${PACKED_FIELD}')
  if not packed then return nil end
  local from = after and idOf(after)
  local out, ms = {}, 0
  for id, json in string.gmatch(packed .. '\\n', '([^\\n]*)\\n([^\\n]*)\\n') do
    local at = idOf(id)
    ms = ms + at[1]
    if not from or ms > from[1] or (ms == from[1] and at[2] > from[2]) then out[#out + 1] = { string.format('%d-%d', ms, at[2]), { 'e', json } } end
  end
  return out
end
`

/** A packed log's entries as [id, JSON], in order. */
export function unpack(packed: string | null): Array<[string, string]> {
  const parts = packed?.split('\n') ?? []
  const out: Array<[string, string]> = []
  let ms = 0
  for (let i = 0; i + 1 < parts.length; i += 2) {
    const [delta = '0', seq = '0'] = parts[i]!.split('-')
    ms += Number(delta)
    out.push([`${ms}-${seq}`, parts[i + 1]!])
  }
  return out
}
