// Which API instance is attached to each session (its lease, renewed by the holder, and the lease's
// term, which fences the writes of a holder that lost it), the sessions each instance holds (what
// another instance takes over when it dies), and the secret every instance of the deployment shares.
import { randomBytes } from 'node:crypto'
import type { Redis } from 'ioredis'
import type { RedisKeys } from './keys.js'
import { defineScripts, queueScript, runScript } from './scripts.js'
import { ACQUIRE_LEASE, RELEASE_LEASE, RENEW_LEASE, TAKE_LEASE } from './session-scripts.js'

/**
 * Who holds a session's lease, and under which term (a number; '' when another instance holds it).
 * The term grows whenever the lease passes to another holder; a holder's writes carry its term, and
 * Redis refuses those of an earlier one (LeaseLost).
 */
export interface Lease {
  holder: string
  term: string
}

/** A write for a session was refused: the lease passed to another holder (or another term) since this instance took it. */
export class LeaseLost extends Error {
  constructor(readonly sessionId: string) {
    super(`the lease of session ${sessionId} passed to another holder`)
    this.name = 'LeaseLost'
  }
}

export class LeaseStore {
  constructor(
    private readonly redis: Redis,
    private readonly keys: RedisKeys,
  ) {
    // Queued in pipelines (renewLeases, releaseLeases): defined on the connection first.
    defineScripts(redis, [RENEW_LEASE, RELEASE_LEASE])
  }

  /** Takes the lease when it is free or already ours; another instance's holds. */
  async acquireLease(sid: string, instanceId: string, ttlMs: number): Promise<Lease> {
    return asLease(await runScript(this.redis, ACQUIRE_LEASE, this.keys.lease(sid), this.keys.leaseTerm(sid), instanceId, ttlMs))
  }

  /**
   * Renews the leases that are still ours under the given term ('' any: sessions being made); returns
   * each session's holder ('' when its lease lapsed and was taken since, or passed to another term).
   */
  async renewLeases(leases: Array<{ sid: string; term: string }>, instanceId: string, ttlMs: number): Promise<Array<[string, string]>> {
    if (leases.length === 0) return []
    const p = this.redis.pipeline()
    for (const { sid, term } of leases) queueScript(p, RENEW_LEASE, this.keys.lease(sid), this.keys.leaseTerm(sid), instanceId, ttlMs, term)
    const res = (await p.exec()) ?? []
    return leases.map(({ sid }, i) => {
      const holder = res[i]?.[1]
      return [sid, typeof holder === 'string' ? holder : instanceId]
    })
  }

  /**
   * Takes the lease if it is free, ours, or `from`'s while `from`'s heartbeat is gone (null: only
   * free or ours), in one atomic step: an instance that came back keeps what it holds.
   */
  async takeLease(sid: string, instanceId: string, from: string | null, ttlMs: number): Promise<Lease> {
    const gone = this.keys.instanceHeartbeat(from ?? instanceId)
    return asLease(await runScript(this.redis, TAKE_LEASE, this.keys.lease(sid), this.keys.leaseTerm(sid), gone, instanceId, from ?? '', ttlMs))
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

function asLease(reply: unknown): Lease {
  const [holder, term] = reply as [string, string]
  return { holder, term }
}
