// A tenant's quotas that Redis counts across instances: its execution slots (a sorted set of the
// executions queued or running, each until the time by which it must have ended) and its requests
// per minute.
import type { Redis } from 'ioredis'
import type { RedisKeys } from './keys.js'
import { runScript } from './scripts.js'
import { ACQUIRE_SLOT } from './session-scripts.js'

export class QuotaStore {
  constructor(
    private readonly redis: Redis,
    private readonly keys: RedisKeys,
  ) {}

  /** Takes one of the tenant's `max` execution slots for `eid` until `untilMs` at the latest. */
  async acquireRunningSlot(tenant: string, eid: string, max: number, untilMs: number): Promise<boolean> {
    return (await runScript(this.redis, ACQUIRE_SLOT, this.keys.tenantRunning(tenant), Date.now(), max, Math.ceil(untilMs), eid)) === 1
  }

  async releaseRunningSlot(tenant: string, eid: string): Promise<void> {
    await this.redis.zrem(this.keys.tenantRunning(tenant), eid)
  }

  /** Adds `n` requests to the tenant's count for one minute (minutes since the epoch); returns every instance's count so far. */
  async addRequests(tenant: string, minute: number, n: number): Promise<number> {
    const key = this.keys.tenantRate(tenant, minute)
    const res = await this.redis.multi().incrby(key, n).pexpire(key, 61000).exec()
    const [err, count] = res?.[0] ?? [new Error('no reply')]
    if (err) throw err
    return Number(count)
  }
}
