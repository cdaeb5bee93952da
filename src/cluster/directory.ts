// The instance directory in Redis: each live API instance keeps a heartbeat (its advertised URL and
// start time, expiring unless renewed) and its id in the set of known instances, so any instance can
// find where a session's holder is reached, and which instances are gone.
import { hostname } from 'node:os'
import type { AddressInfo } from 'node:net'
import type { Redis } from 'ioredis'
import type { RedisKeys } from '../store/keys.js'

export interface DirectoryDeps {
  redis: Redis
  keys: RedisKeys
  instanceId: string
  heartbeatMs: number
  leaseTtlMs: number
  /** REPLCAST_ADVERTISE_URL ('' = derived from the address the server listens on). */
  advertiseUrl: string
  host: string
  port: number
}

/** http://host:port for a listen address; a wildcard address is reached by this machine's name. */
function defaultUrl(host: string, port: number): string {
  const name = host === '' || host === '0.0.0.0' || host === '::' ? hostname() : host
  return `http://${name.includes(':') ? `[${name}]` : name}:${port}`
}

export class InstanceDirectory {
  /** How long a heartbeat lives: three beats, never longer than a lease (failover stays within the lease TTL). */
  readonly ttlMs: number
  private url: string
  private readonly startedAt = Date.now()
  /** Live instances' URLs as of the last survey or look-up: a cache, checked against Redis when a hop fails. */
  private readonly urls = new Map<string, string>()

  constructor(private readonly deps: DirectoryDeps) {
    this.ttlMs = Math.min(3 * deps.heartbeatMs, deps.leaseTtlMs)
    this.url = deps.advertiseUrl || defaultUrl(deps.host, deps.port)
  }

  /** The server is listening: without a configured URL, the real port (PORT=0) is the one to advertise. */
  listening(address: string | AddressInfo | null): void {
    if (this.deps.advertiseUrl || !address || typeof address === 'string') return
    this.url = defaultUrl(this.deps.host, address.port)
  }

  /** Says this instance is alive (and where it is reached) for another ttlMs. */
  async beat(): Promise<void> {
    const { redis, keys, instanceId } = this.deps
    const key = keys.instanceHeartbeat(instanceId)
    await redis
      .multi()
      .hset(key, { url: this.url, started_at: String(this.startedAt) })
      .pexpire(key, this.ttlMs)
      .sadd(keys.instances(), instanceId)
      .exec()
  }

  /** This instance stops: its heartbeat goes at once (its id stays known until its sessions are taken over). */
  async end(): Promise<void> {
    await this.deps.redis.del(this.deps.keys.instanceHeartbeat(this.deps.instanceId))
  }

  /** Every known instance other than this one whose heartbeat is gone; refreshes the URL cache. */
  async gone(): Promise<string[]> {
    const { redis, keys, instanceId } = this.deps
    const ids = (await redis.smembers(keys.instances())).filter((id) => id !== instanceId)
    if (ids.length === 0) return []
    const p = redis.pipeline()
    for (const id of ids) p.hget(keys.instanceHeartbeat(id), 'url')
    const res = (await p.exec()) ?? []
    const dead: string[] = []
    ids.forEach((id, i) => {
      const url = res[i]?.[1]
      if (typeof url === 'string') this.urls.set(id, url)
      else if (!res[i]?.[0]) {
        this.urls.delete(id)
        dead.push(id)
      }
    })
    return dead
  }

  /** Where a live instance is reached; null when its heartbeat is gone. From the cache when it can. */
  async lookup(id: string): Promise<string | null> {
    const cached = this.urls.get(id)
    if (cached) return cached
    const url = await this.deps.redis.hget(this.deps.keys.instanceHeartbeat(id), 'url')
    if (url) this.urls.set(id, url)
    return url
  }

  /** A hop to the instance failed: its cached URL is no longer trusted. */
  forget(id: string): void {
    this.urls.delete(id)
  }

  /** Whether the instance's heartbeat is current (Redis, never the cache). */
  async isAlive(id: string): Promise<boolean> {
    return (await this.deps.redis.exists(this.deps.keys.instanceHeartbeat(id))) === 1
  }

  /** Drops a gone instance from the known ones once no session is left in its set. */
  async dropIfEmpty(id: string): Promise<void> {
    const { redis, keys } = this.deps
    if ((await redis.scard(keys.instanceSessions(id))) === 0 && !(await this.isAlive(id))) await redis.srem(keys.instances(), id)
  }
}
