// Snapshots in Redis: each one's record (its checkpoint's checksum among it), each tenant's set of
// them and the bytes they hold (max_snapshots, max_snapshot_bytes), and when each expires.
import type { Redis } from 'ioredis'
import type { RedisKeys } from './keys.js'
import type { SessionRecord } from './records.js'
import { luaScript, runScript } from './scripts.js'

export interface SnapshotRecord {
  id: string
  tenant: string
  /** The session it was taken from (which may be gone since). */
  session_id: string
  name: string
  created_at: number
  expires_at: number
  bytes: number
  /** The session's executions when it was taken: a session from it counts on from there. */
  execution_count: number
  /** sha256 of its checkpoint's files, checked before each restore (checkpoint-store.ts). */
  digest: string
  runtime: string
  template: string
  /** What a session restored from it runs with: the sandbox it was taken from. */
  limits: SessionRecord['limits']
  env: Record<string, string>
  engine: string
}

// A place among the tenant's snapshots: -1 none left (ARGV[2] the most), -2 its bytes are at ARGV[3] already.
const RESERVE = luaScript(
  'snapshot_reserve',
  2,
  `
if redis.call('SCARD', KEYS[1]) >= tonumber(ARGV[2]) then return -1 end
if tonumber(redis.call('GET', KEYS[2]) or '0') >= tonumber(ARGV[3]) then return -2 end
redis.call('SADD', KEYS[1], ARGV[1])
return 1`,
)

// The checkpoint is written: the record (ARGV[5..]) unless its bytes (ARGV[2]) pass the tenant's ARGV[3]; 0 then.
const COMMIT = luaScript(
  'snapshot_commit',
  3,
  `
if tonumber(redis.call('GET', KEYS[2]) or '0') + tonumber(ARGV[2]) > tonumber(ARGV[3]) then return 0 end
redis.call('INCRBY', KEYS[2], ARGV[2])
for i = 5, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[1])
return 1`,
)

// Deletes the record and gives its bytes back; 0 when it was gone (deleted once only).
const DELETE = luaScript(
  'snapshot_delete',
  4,
  `
redis.call('SREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
local bytes = redis.call('HGET', KEYS[1], 'bytes')
if not bytes then return 0 end
redis.call('DECRBY', KEYS[3], bytes)
redis.call('DEL', KEYS[1])
return 1`,
)

export class SnapshotStore {
  constructor(
    private readonly redis: Redis,
    private readonly keys: RedisKeys,
  ) {}

  /** Takes a place among the tenant's snapshots: 'ok', 'count' (max_snapshots reached) or 'bytes' (max_snapshot_bytes). */
  async reserve(tenant: string, id: string, maxCount: number, maxBytes: number): Promise<'ok' | 'count' | 'bytes'> {
    const k = this.keys
    const r = await runScript(this.redis, RESERVE, k.tenantSnapshots(tenant), k.tenantSnapshotBytes(tenant), id, maxCount, maxBytes)
    return r === 1 ? 'ok' : r === -1 ? 'count' : 'bytes'
  }

  /** Gives back a place reserve() took (the snapshot was not made). */
  async cancel(tenant: string, id: string): Promise<void> {
    await this.redis.srem(this.keys.tenantSnapshots(tenant), id)
  }

  /** Records the written snapshot; false when its bytes would pass the tenant's `maxBytes` (the caller removes it). */
  async commit(rec: SnapshotRecord, maxBytes: number): Promise<boolean> {
    const k = this.keys
    const fields = Object.entries(toFields(rec)).flat()
    const keys = [k.snapshot(rec.id), k.tenantSnapshotBytes(rec.tenant), k.snapshotExpiries()]
    return (await runScript(this.redis, COMMIT, ...keys, rec.id, rec.bytes, maxBytes, rec.expires_at, ...fields)) === 1
  }

  async get(id: string): Promise<SnapshotRecord | null> {
    const h = await this.redis.hgetall(this.keys.snapshot(id))
    return h.id ? fromFields(h) : null
  }

  /** The tenant's snapshot ids, sorted (places reserved for ones being written included). */
  async tenantIds(tenant: string): Promise<string[]> {
    return (await this.redis.smembers(this.keys.tenantSnapshots(tenant))).sort()
  }

  /** Deletes the record; false when it was gone already. */
  async delete(rec: Pick<SnapshotRecord, 'id' | 'tenant'>): Promise<boolean> {
    const k = this.keys
    const keys = [k.snapshot(rec.id), k.tenantSnapshots(rec.tenant), k.tenantSnapshotBytes(rec.tenant), k.snapshotExpiries()]
    return (await runScript(this.redis, DELETE, ...keys, rec.id)) === 1
  }

  /** Up to `max` snapshot ids expired at `nowMs`. */
  async expired(nowMs: number, max = 100): Promise<string[]> {
    return this.redis.zrangebyscore(this.keys.snapshotExpiries(), 0, nowMs, 'LIMIT', 0, max)
  }

  /** Every snapshot's count and bytes (for /metrics). */
  async usage(): Promise<{ snapshots: number; bytes: number }> {
    const ids = await this.redis.zrange(this.keys.snapshotExpiries(), '0', '-1')
    const bytes = ids.length ? await Promise.all(ids.map((id) => this.redis.hget(this.keys.snapshot(id), 'bytes'))) : []
    return { snapshots: ids.length, bytes: bytes.reduce((n, b) => n + Number(b ?? 0), 0) }
  }
}

function toFields(rec: SnapshotRecord): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [k, v] of Object.entries(rec)) out[k] = typeof v === 'object' ? JSON.stringify(v) : String(v)
  return out
}

function fromFields(h: Record<string, string>): SnapshotRecord {
  return {
    id: h.id!,
    tenant: h.tenant ?? '',
    session_id: h.session_id ?? '',
    name: h.name ?? '',
    created_at: Number(h.created_at),
    expires_at: Number(h.expires_at),
    bytes: Number(h.bytes),
    execution_count: Number(h.execution_count ?? 0),
    digest: h.digest ?? '',
    runtime: h.runtime ?? '',
    template: h.template ?? '',
    limits: JSON.parse(h.limits ?? '{}') as SessionRecord['limits'],
    env: JSON.parse(h.env ?? '{}') as Record<string, string>,
    engine: h.engine ?? '',
  }
}
