// Docker engines in Redis: each API instance reports its engine's free capacity and itself as one
// of the engine's instances, with a time to live, so that creates are placed on the engine with the
// most room and a session is taken over only by an instance on its own engine.
import type { Redis } from 'ioredis'
import type { RedisKeys } from './keys.js'

/** What an engine reported last: its sandboxes' memory against what they may use. */
export interface EngineReport {
  id: string
  /** Bytes its sandboxes may still be promised (HOST_MEMORY_SHARE of its memory, less their limits); may be negative. */
  freeBytes: number
  totalBytes: number
  /** Live replcast sandboxes on it (sessions and warm pools, any deployment). */
  sandboxes: number
  updatedAt: number
}

// KEYS: engines, engine, engine instances. ARGV: engine id, instance id, now, ttl, then field/value pairs.
// Drops lapsed members on the way, so neither set grows with engines and instances long gone.
const REPORT = `
local now = tonumber(ARGV[3])
local ttl = tonumber(ARGV[4])
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('DEL', KEYS[2])
for i = 5, #ARGV, 2 do redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1]) end
redis.call('PEXPIRE', KEYS[2], ttl)
redis.call('ZADD', KEYS[3], now + ttl, ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
redis.call('PEXPIRE', KEYS[3], ttl)
return 1`

// An instance leaves its engine (shutdown); the engine goes with its last instance.
const WITHDRAW = `
redis.call('ZREM', KEYS[3], ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', ARGV[3])
if redis.call('ZCARD', KEYS[3]) == 0 then
  redis.call('DEL', KEYS[2], KEYS[3])
  redis.call('ZREM', KEYS[1], ARGV[1])
end
return 1`

export class EngineStore {
  constructor(
    private readonly redis: Redis,
    private readonly keys: RedisKeys,
  ) {}

  async report(r: EngineReport, instanceId: string, ttlMs: number): Promise<void> {
    const k = this.keys
    const fields = { free_bytes: r.freeBytes, total_bytes: r.totalBytes, sandboxes: r.sandboxes, updated_at: r.updatedAt }
    await this.redis.eval(
      REPORT,
      3,
      k.engines(),
      k.engine(r.id),
      k.engineInstances(r.id),
      r.id,
      instanceId,
      Date.now(),
      ttlMs,
      ...Object.entries(fields).flatMap(([f, v]) => [f, String(v)]),
    )
  }

  async withdraw(engineId: string, instanceId: string): Promise<void> {
    const k = this.keys
    await this.redis.eval(WITHDRAW, 3, k.engines(), k.engine(engineId), k.engineInstances(engineId), engineId, instanceId, Date.now())
  }

  /** Every engine with a live instance (but `except`), with its last report. */
  async live(except?: string): Promise<EngineReport[]> {
    const k = this.keys
    const ids = (await this.redis.zrangebyscore(k.engines(), Date.now(), '+inf')).filter((id) => id !== except)
    if (ids.length === 0) return []
    const p = this.redis.pipeline()
    for (const id of ids) p.hgetall(k.engine(id))
    const res = (await p.exec()) ?? []
    const out: EngineReport[] = []
    ids.forEach((id, i) => {
      const h = res[i]?.[1] as Record<string, string> | undefined
      if (!h?.free_bytes) return
      out.push({ id, freeBytes: Number(h.free_bytes), totalBytes: Number(h.total_bytes), sandboxes: Number(h.sandboxes), updatedAt: Number(h.updated_at) })
    })
    return out
  }

  /**
   * The instances on `engineId` that are alive: their report on it has not lapsed, and their
   * heartbeat in the instance directory (src/cluster/directory.ts) is current (it goes at once when
   * an instance stops, and within three beats when one dies).
   */
  async instances(engineId: string): Promise<string[]> {
    const { redis, keys } = this
    const ids = await redis.zrangebyscore(keys.engineInstances(engineId), Date.now(), '+inf')
    if (ids.length === 0) return []
    const p = redis.pipeline()
    for (const id of ids) p.exists(keys.instanceHeartbeat(id))
    const res = (await p.exec()) ?? []
    return ids.filter((_, i) => res[i]?.[1] === 1)
  }
}
