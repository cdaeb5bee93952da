// The one place the service's Redis connections are made: REDIS_URL, or through Redis Sentinel
// (REDIS_SENTINELS, REDIS_SENTINEL_NAME) so that Redis itself can fail over. Connections made from
// this one with duplicate() (the blocking reader, the cluster's subscriber) follow the same master.
import { Redis, type RedisOptions } from 'ioredis'

/**
 * Where the Redis master is, as src/config.ts parsed it (the store is handed its settings; it reads no
 * configuration itself): REDIS_URL, or the sentinels that name the master (none: REDIS_URL is the master).
 */
export interface RedisTarget {
  readonly REDIS_URL: string
  readonly redisSentinels: ReadonlyArray<{ host: string; port: number }>
  readonly REDIS_SENTINEL_NAME: string
}

/** A new connection to the Redis master: direct, or the master the sentinels name now (and after each failover). */
export function connectRedis(target: RedisTarget, opts: RedisOptions = {}): Redis {
  if (target.redisSentinels.length === 0) return new Redis(target.REDIS_URL, opts)
  // Credentials and database still come from REDIS_URL (its host and port are the sentinels' to say).
  const url = new URL(target.REDIS_URL)
  const db = Number(url.pathname.replace(/^\//, '') || 0)
  return new Redis({
    ...opts,
    sentinels: [...target.redisSentinels],
    name: target.REDIS_SENTINEL_NAME,
    ...(url.username ? { username: decodeURIComponent(url.username) } : {}),
    ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
    db,
    // Told by the sentinels when the master changes, instead of finding out at the next failed command.
    failoverDetector: true,
    // A master demoted to a replica answers writes with READONLY: reconnect (to the new master) and send again.
    reconnectOnError: (err) => (err.message.startsWith('READONLY') ? 2 : false),
  })
}
