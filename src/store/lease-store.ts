// Which API instance is attached to each session (its lease, renewed by the holder), the sessions
// each instance holds (what another instance takes over when it dies), and the secret every
// instance of the deployment shares.
import { randomBytes } from 'node:crypto'
import type { Redis } from 'ioredis'
import type { RedisKeys } from './keys.js'
import { defineScripts, queueScript, runScript } from './scripts.js'
import { ACQUIRE_LEASE, RELEASE_LEASE, TAKE_LEASE } from './session-scripts.js'

export class LeaseStore {
  constructor(
    private readonly redis: Redis,
    private readonly keys: RedisKeys,
  ) {
    // Queued in pipelines (renewLeases, releaseLeases): defined on the connection first.
    defineScripts(redis, [ACQUIRE_LEASE, RELEASE_LEASE])
  }

  async acquireLease(sid: string, instanceId: string, ttlMs: number): Promise<string> {
    return (await runScript(this.redis, ACQUIRE_LEASE, this.keys.lease(sid), instanceId, ttlMs)) as string
  }

  /** Renews the leases that are still ours; returns each session's holder. */
  async renewLeases(sids: string[], instanceId: string, ttlMs: number): Promise<Array<[string, string]>> {
    if (sids.length === 0) return []
    const p = this.redis.pipeline()
    for (const sid of sids) queueScript(p, ACQUIRE_LEASE, this.keys.lease(sid), instanceId, ttlMs)
    const res = (await p.exec()) ?? []
    return sids.map((sid, i) => {
      const holder = res[i]?.[1]
      return [sid, typeof holder === 'string' ? holder : instanceId]
    })
  }

  /** Takes the lease if it is free, ours, or `from`'s (null: only free or ours); returns the holder. */
  async takeLease(sid: string, instanceId: string, from: string | null, ttlMs: number): Promise<string> {
    return (await runScript(this.redis, TAKE_LEASE, this.keys.lease(sid), instanceId, from ?? '', ttlMs)) as string
  }

  /** Frees the leases among `sids` that are still this instance's (a hand-over), in one round trip. */
  async releaseLeases(sids: string[], instanceId: string): Promise<void> {
    if (sids.length === 0) return
    const p = this.redis.pipeline()
    for (const sid of sids) queueScript(p, RELEASE_LEASE, this.keys.lease(sid), instanceId)
    await p.exec()
  }

  async leaseHolder(sid: string): Promise<string | null> {
    return this.redis.get(this.keys.lease(sid))
  }

  async releaseLease(sid: string, instanceId: string): Promise<void> {
    const key = this.keys.lease(sid)
    if ((await this.redis.get(key)) === instanceId) await this.redis.del(key)
  }

  async addInstanceSession(iid: string, sid: string): Promise<void> {
    await this.redis.sadd(this.keys.instanceSessions(iid), sid)
  }
  async removeInstanceSession(iid: string, sid: string): Promise<void> {
    await this.redis.srem(this.keys.instanceSessions(iid), sid)
  }
  async instanceSessionIds(iid: string): Promise<string[]> {
    return this.redis.smembers(this.keys.instanceSessions(iid))
  }

  /** A secret shared by every API instance of this deployment (created on first use). */
  async sharedSecret(): Promise<string> {
    const key = this.keys.secret()
    await this.redis.set(key, randomBytes(32).toString('hex'), 'NX')
    return (await this.redis.get(key)) ?? ''
  }
}
