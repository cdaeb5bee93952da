// The one place the service's Redis connections are made: REDIS_URL, or through Redis Sentinel
// (REDIS_SENTINELS, REDIS_SENTINEL_NAME) so that Redis itself can fail over. Connections made from
// this one with duplicate() (the blocking reader, the cluster's subscriber) follow the same master.
import { Redis, type RedisOptions } from 'ioredis'
import type { Config } from '../config.js'

/** `host:port,host:port` → ioredis's sentinel list (a missing port is Sentinel's 26379); throws on a malformed entry. */
export function parseSentinels(list: string): Array<{ host: string; port: number }> {
  return list
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((s) => {
      // host, host:port, [v6 address]:port
      const m = /^(?:\[([^\]]+)\]|([^:[\]]+))(?::(\d{1,5}))?$/.exec(s)
      if (!m) throw new Error(`invalid sentinel address ${JSON.stringify(s)} (expected host:port)`)
      return { host: (m[1] ?? m[2])!, port: m[3] ? Number(m[3]) : 26379 }
    })
}

/** A new connection to the Redis master: direct, or the master the sentinels name now (and after each failover). */
export function connectRedis(config: Pick<Config, 'REDIS_URL' | 'REDIS_SENTINELS' | 'REDIS_SENTINEL_NAME'>, opts: RedisOptions = {}): Redis {
  if (!config.REDIS_SENTINELS) return new Redis(config.REDIS_URL, opts)
  // Credentials and database still come from REDIS_URL (its host and port are the sentinels' to say).
  const url = new URL(config.REDIS_URL)
  const db = Number(url.pathname.replace(/^\//, '') || 0)
  return new Redis({
    ...opts,
    sentinels: parseSentinels(config.REDIS_SENTINELS),
    name: config.REDIS_SENTINEL_NAME,
    ...(url.username ? { username: decodeURIComponent(url.username) } : {}),
    ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
    db,
    // Told by the sentinels when the master changes, instead of finding out at the next failed command.
    failoverDetector: true,
    // A master demoted to a replica answers writes with READONLY: reconnect (to the new master) and send again.
    reconnectOnError: (err) => (err.message.startsWith('READONLY') ? 2 : false),
  })
}
