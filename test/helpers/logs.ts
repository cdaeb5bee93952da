// An execution's log as Redis holds it: a stream while it runs (and while it is large), or packed
// into its record once the session's next execution starts (src/store/log-packing.ts).
import type { Redis } from 'ioredis'
import { redisKeys } from '../../src/store/keys.js'
import { PACKED_FIELD, unpack } from '../../src/store/log-packing.js'

/** The log's entries as [id, JSON], from either form; [] when it is gone. */
export async function logEntries(redis: Redis, prefix: string, sid: string, eid: string): Promise<Array<[string, string]>> {
  const keys = redisKeys(prefix)
  const rows = await redis.xrange(keys.events(sid, eid), '-', '+')
  if (rows.length > 0) return rows.map(([id, fields]) => [id, fields[1] ?? ''])
  return unpack(await redis.hget(keys.execution(sid, eid), PACKED_FIELD))
}
