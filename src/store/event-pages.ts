// Reads an execution's event log in pages bounded by count and by bytes, so that one reader of a
// large log (a GET, a JSON reply, an SSE follower) holds one page in memory, never the whole log.
import type { Redis } from 'ioredis'
import { PACKED_READ_LUA } from './log-packing.js'
import { luaScript, runScript } from './scripts.js'

/** At most this many events per page... */
const PAGE_EVENTS = 100
/** ...and no more than this many bytes of them (a single larger event is a page of its own). */
const PAGE_BYTES = 256 * 1024

// KEYS: 1 the stream, 2 the execution's record (where a small ended log is packed: log-packing.ts).
// ARGV: 1 start ('-' or '(id'), 2 most events, 3 most bytes. One entry at a time, so Redis never
// builds a reply larger than the byte budget and one entry.
const READ_PAGE =
  PACKED_READ_LUA +
  `
local out, bytes, start = {}, 0, ARGV[1]
local most, budget = tonumber(ARGV[2]), tonumber(ARGV[3])
if redis.call('EXISTS', KEYS[1]) == 0 then
  local packed = packedAfter(KEYS[2], start ~= '-' and string.sub(start, 2) or nil) or {}
  while #packed > most do table.remove(packed) end
  return packed
end
while #out < most do
  local e = redis.call('XRANGE', KEYS[1], start, '+', 'COUNT', 1)[1]
  if not e then break end
  out[#out + 1] = e
  bytes = bytes + #e[2][2]
  if bytes >= budget then break end
  start = '(' .. e[1]
end
return out`

const READ_PAGE_SCRIPT = luaScript('read_page', 2, READ_PAGE)

/**
 * Raw entries after `afterId` (exclusive; '' = from the start), oldest first: [id, fields]; `more`
 * when the page stopped at one of its bounds rather than at the end of the log.
 */
export async function readPage(
  redis: Redis,
  key: string,
  recordKey: string,
  afterId: string,
  maxEvents: number,
  maxBytes = PAGE_BYTES,
): Promise<{ rows: Array<[string, string[]]>; more: boolean }> {
  const most = Math.min(maxEvents, PAGE_EVENTS)
  const rows = (await runScript(redis, READ_PAGE_SCRIPT, key, recordKey, afterId ? `(${afterId}` : '-', most, maxBytes)) as Array<[string, string[]]>
  let bytes = 0
  for (const [, fields] of rows) bytes += Buffer.byteLength(fields[1] ?? '')
  return { rows, more: rows.length >= most || bytes >= maxBytes }
}
