// The warm pool's state in Redis: a heartbeat per instance that keeps pooled sandboxes (so another
// instance's sweep can tell a dead instance's leftovers from a live one's pool), and the binding of
// each pooled container to the session that took it (its labels cannot say: they are fixed at create).
import type { Redis } from 'ioredis'
import type { RedisKeys } from './keys.js'

export class PoolStore {
  constructor(
    private readonly redis: Redis,
    private readonly keys: RedisKeys,
  ) {}

  /** Says the instance is alive and keeps a pool, for `ttlMs`. */
  async heartbeat(instanceId: string, ttlMs: number): Promise<void> {
    await this.redis.set(this.keys.instancePool(instanceId), String(Date.now()), 'PX', ttlMs)
  }

  async endHeartbeat(instanceId: string): Promise<void> {
    await this.redis.del(this.keys.instancePool(instanceId))
  }

  /** The instances among `ids` whose heartbeat is current. */
  async aliveInstances(ids: string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set()
    const p = this.redis.pipeline()
    for (const id of ids) p.exists(this.keys.instancePool(id))
    const res = (await p.exec()) ?? []
    return new Set(ids.filter((_, i) => res[i]?.[1] === 1))
  }

  /** Records that `sessionId` took the pooled container `containerId`. */
  async bind(containerId: string, sessionId: string): Promise<void> {
    await this.redis.hset(this.keys.poolBindings(), containerId, sessionId)
  }

  /** Every binding: container id → session id. */
  async bindings(): Promise<Map<string, string>> {
    return new Map(Object.entries(await this.redis.hgetall(this.keys.poolBindings())))
  }

  /** The containers among `ids` that are bound to a session. */
  async bound(ids: string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set()
    const sids = await this.redis.hmget(this.keys.poolBindings(), ...ids)
    return new Set(ids.filter((_, i) => sids[i] !== null))
  }

  async unbind(containerIds: string[]): Promise<void> {
    if (containerIds.length) await this.redis.hdel(this.keys.poolBindings(), ...containerIds)
  }

  /** The engine each of these sessions records ('' when it records none; absent when Redis no longer knows the session). */
  async sessionEngines(ids: string[]): Promise<Map<string, string>> {
    if (ids.length === 0) return new Map()
    const p = this.redis.pipeline()
    for (const id of ids) p.hmget(this.keys.session(id), 'id', 'engine')
    const res = (await p.exec()) ?? []
    const out = new Map<string, string>()
    ids.forEach((id, i) => {
      const [known, engine] = (res[i]?.[1] as Array<string | null> | undefined) ?? [null, null]
      if (known) out.set(id, engine ?? '')
    })
    return out
  }

  /** The sessions among `ids` that Redis still knows. */
  async existingSessions(ids: string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set()
    const p = this.redis.pipeline()
    for (const id of ids) p.exists(this.keys.session(id))
    const res = (await p.exec()) ?? []
    return new Set(ids.filter((_, i) => res[i]?.[1] === 1))
  }
}
