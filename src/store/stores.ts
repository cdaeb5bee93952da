// Redis is the only shared state. One store per concern, all on one connection (its writes leave
// once per event-loop turn, turn-batching.ts): built together here, so that every event a store
// appends is counted against its tenant's max_event_bytes in one place (EventBytes).
import type { Redis } from 'ioredis'
import { EngineStore } from './engine-store.js'
import { EventBytes } from './event-bytes.js'
import { EventLogStore } from './event-log-store.js'
import { ExecutionStore } from './execution-store.js'
import { redisKeys, type RedisKeys } from './keys.js'
import { LeaseStore } from './lease-store.js'
import { PoolStore } from './pool-store.js'
import { ProcessStore } from './process-store.js'
import { QuotaStore } from './quota-store.js'
import { SessionStore } from './session-store.js'
import { SnapshotStore } from './snapshot-store.js'

export interface Stores {
  /** The connection they share, for the parts that keep state of their own in Redis (the cluster's directory, the event feed). */
  readonly redis: Redis
  readonly keys: RedisKeys
  /** Session records, each tenant's sessions, idle deadlines. */
  readonly sessions: SessionStore
  /** Which instance holds each session, the sessions each instance holds, the deployment's shared secret. */
  readonly leases: LeaseStore
  /** Each tenant's execution slots and request counts. */
  readonly quotas: QuotaStore
  /** Execution records: queued, started, ended, read. */
  readonly executions: ExecutionStore
  /** Execution event logs (and background processes' output logs): appended and read. */
  readonly logs: EventLogStore
  /** Background processes: recorded, ended, listed, forgotten. */
  readonly processes: ProcessStore
  /** Docker engines' capacity reports and their instances. */
  readonly engines: EngineStore
  /** Warm pools' heartbeats and the sessions that took pooled containers. */
  readonly pool: PoolStore
  /** Snapshots' records, each tenant's snapshots and their bytes, expiries. */
  readonly snapshots: SnapshotStore
}

export interface StoreOptions {
  /** Every key starts with it (REPLCAST_KEY_PREFIX). */
  prefix: string
  /** Entries an event log keeps (EVENT_LOG_MAXLEN). */
  eventMaxLen: number
  /** Seconds an ended execution's record and log are kept (EVENT_LOG_TTL_S). */
  eventTtlS: number
  /** A tenant's max_event_bytes (none without it). */
  eventBytesLimit?: (tenant: string) => number
}

/** Every store, on the connection `redis`. */
export function createStores(redis: Redis, opts: StoreOptions): Stores {
  const keys = redisKeys(opts.prefix)
  const limitFor = opts.eventBytesLimit ?? (() => Number.MAX_SAFE_INTEGER)
  const eventBytes = new EventBytes(redis, keys, { prefix: opts.prefix, maxLen: opts.eventMaxLen, ttlS: opts.eventTtlS, limitFor })
  return {
    redis,
    keys,
    sessions: new SessionStore(redis, keys, eventBytes),
    snapshots: new SnapshotStore(redis, keys),
    leases: new LeaseStore(redis, keys),
    quotas: new QuotaStore(redis, keys),
    executions: new ExecutionStore(redis, keys, eventBytes, { eventTtlS: opts.eventTtlS }),
    logs: new EventLogStore(redis, keys, eventBytes),
    processes: new ProcessStore(redis, keys, eventBytes, { prefix: opts.prefix, maxLen: opts.eventMaxLen, limitFor }),
    engines: new EngineStore(redis, keys),
    pool: new PoolStore(redis, keys),
  }
}
