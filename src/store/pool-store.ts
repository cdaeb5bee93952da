// The warm pool's state in Redis: a heartbeat per instance that keeps pooled sandboxes (so another
// instance's sweep can tell a dead instance's leftovers from a live one's pool), and the binding of
// each pooled container to the session that took it (its labels cannot say: they are fixed at create).
import type { RedisStore } from './redis-store.js'

export class PoolStore {
  constructor(private readonly store: RedisStore) {}

  /** Says the instance is alive and keeps a pool, for `ttlMs`. */
  async heartbeat(instanceId: string, ttlMs: number): Promise<void> {
    await this.store.redis.set(this.store.keys.instancePool(instanceId), String(Date.now()), 'PX', ttlMs)
  }

  async endHeartbeat(instanceId: string): Promise<void> {
    await this.store.redis.del(this.store.keys.instancePool(instanceId))
  }

  /** The instances among `ids` whose heartbeat is current. */
  async aliveInstances(ids: string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set()
    const p = this.store.redis.pipeline()
    for (const id of ids) p.exists(this.store.keys.instancePool(id))
    const res = (await p.exec()) ?? []
    return new Set(ids.filter((_, i) => res[i]?.[1] === 1))
  }

  /** Records that `sessionId` took the pooled container `containerId`. */
  async bind(containerId: string, sessionId: string): Promise<void> {
    await this.store.redis.hset(this.store.keys.poolBindings(), containerId, sessionId)
  }

  /** Every binding: container id → session id. */
  async bindings(): Promise<Map<string, string>> {
    return new Map(Object.entries(await this.store.redis.hgetall(this.store.keys.poolBindings())))
  }

  /** The containers among `ids` that are bound to a session. */
  async bound(ids: string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set()
    const sids = await this.store.redis.hmget(this.store.keys.poolBindings(), ...ids)
    return new Set(ids.filter((_, i) => sids[i] !== null))
  }

  async unbind(containerIds: string[]): Promise<void> {
    if (containerIds.length) await this.store.redis.hdel(this.store.keys.poolBindings(), ...containerIds)
  }

  /** The engine each of these sessions records ('' when it records none; absent when Redis no longer knows the session). */
  async sessionEngines(ids: string[]): Promise<Map<string, string>> {
    if (ids.length === 0) return new Map()
    const p = this.store.redis.pipeline()
    for (const id of ids) p.hmget(this.store.keys.session(id), 'id', 'engine')
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
    const p = this.store.redis.pipeline()
    for (const id of ids) p.exists(this.store.keys.session(id))
    const res = (await p.exec()) ?? []
    return new Set(ids.filter((_, i) => res[i]?.[1] === 1))
  }
}
