// Snapshots and forks: a copy of a runsc session's state (memory, workspace, processes) at one
// moment, and new sessions started from such a copy. runsc here cannot checkpoint and leave the
// sandbox running (`--leave-running` panics "paused => stopped" and ends it), so a copy is taken
// by hibernating the session, linking its checkpoint aside while requests wait, and waking it: the
// session keeps its id and state, and pauses for the hibernation and the wake. A new session is
// made hibernated, from a linked copy whose checksum is the source's, and woken like any other.
import type { Logger } from 'pino'
import type { Config } from '../config.js'
import { AppError } from '../errors.js'
import type { CreateSessionBodyT, SessionT } from '../schemas.js'
import type { ForkBodyT, SnapshotT } from '../snapshot-schemas.js'
import type { SandboxDriver } from '../sandbox/driver.js'
import type { SessionRecord } from '../store/records.js'
import type { SnapshotRecord } from '../store/snapshot-store.js'
import type { Stores } from '../store/stores.js'
import { DEFAULT_TEMPLATE } from '../templates.js'
import { newId } from './ids.js'
import type { SessionService } from './session-service.js'
import { CheckpointCopies, quota, type RemoteCopies, type Source } from './checkpoint-copies.js'
import type { CheckpointStore, Engines } from './supply/index.js'

const MIB = 1024 * 1024

export interface SnapshotsDeps {
  config: Config
  stores: Pick<Stores, 'sessions' | 'snapshots'>
  driver: Pick<SandboxDriver, 'checkpointRefusal'>
  sessions: SessionService
  checkpoints: CheckpointStore
  log: Logger
  /** This instance's engine id ('' unknown). */
  engine: () => string
  engines: Pick<Engines, 'othersWithRoom'>
}

export class Snapshots {
  private readonly copies: CheckpointCopies
  constructor(private readonly deps: SnapshotsDeps) {
    this.copies = new CheckpointCopies(deps)
  }

  /** From now on a fork may place copies on other engines (the app wires this once the cluster exists). */
  placeCopiesWith(remote: RemoteCopies): void {
    this.copies.placeWith(remote)
  }

  /** Snapshots the session. Throws session_not_found, not_supported, session_busy, quota_exceeded, session_dead, checkpoint_space, sandbox_failed. */
  async take(tenant: string, sid: string, name: string): Promise<SnapshotT> {
    const { stores, config, checkpoints } = this.deps
    const rec = await this.checkpointable(tenant, sid)
    const limits = config.tenantLimits.for(tenant)
    const id = newId('snp')
    const place = await stores.snapshots.reserve(tenant, id, limits.max_snapshots, limits.max_snapshot_bytes)
    if (place !== 'ok')
      throw quota(place === 'count' ? `tenant already has ${limits.max_snapshots} snapshots (the maximum)` : bytesFull(limits.max_snapshot_bytes))
    try {
      const copy = await this.copies.capture(rec, id)
      const pauseMs = await copy.woken
      const now = Date.now()
      const snap: SnapshotRecord = {
        id,
        tenant,
        session_id: sid,
        name,
        created_at: now,
        expires_at: now + config.SNAPSHOT_TTL_S * 1000,
        bytes: copy.bytes,
        execution_count: copy.execution_count,
        digest: copy.digest,
        runtime: rec.runtime,
        template: rec.template ?? DEFAULT_TEMPLATE,
        limits: rec.limits,
        env: rec.env,
        engine: this.deps.engine() || rec.engine || '',
      }
      if (!(await stores.snapshots.commit(snap, limits.max_snapshot_bytes))) throw quota(bytesFull(limits.max_snapshot_bytes))
      this.deps.log.info({ sessionId: sid, snapshotId: id, bytes: copy.bytes, pauseMs: Math.round(pauseMs) }, 'snapshot taken')
      return toSnapshot(snap)
    } catch (err) {
      await checkpoints.remove(id)
      await stores.snapshots.cancel(tenant, id)
      throw err
    }
  }

  async get(tenant: string, id: string): Promise<SnapshotT> {
    return toSnapshot(await this.record(tenant, id))
  }

  /** The tenant's snapshots ordered by id; `cursor` is the last id of the previous page. */
  async list(tenant: string, limit: number, cursor?: string): Promise<{ snapshots: SnapshotT[]; next_cursor: string | null }> {
    const ids = (await this.deps.stores.snapshots.tenantIds(tenant)).filter((id) => !cursor || id > cursor)
    const page = ids.slice(0, limit)
    const recs = await Promise.all(page.map((id) => this.deps.stores.snapshots.get(id)))
    return {
      snapshots: recs.filter((r): r is SnapshotRecord => r !== null).map(toSnapshot),
      next_cursor: ids.length > limit ? (page[page.length - 1] ?? null) : null,
    }
  }

  async delete(tenant: string, id: string): Promise<void> {
    await this.remove(await this.record(tenant, id))
  }

  /** Deletes the snapshot's record and its checkpoint (an expired one's too). */
  async remove(snap: Pick<SnapshotRecord, 'id' | 'tenant'>): Promise<void> {
    await this.deps.stores.snapshots.delete(snap)
    await this.deps.checkpoints.remove(snap.id)
    this.deps.log.info({ snapshotId: snap.id, tenant: snap.tenant }, 'snapshot deleted')
  }

  /** Deletes the snapshots past their expiry. */
  async expire(nowMs = Date.now()): Promise<void> {
    for (const id of await this.deps.stores.snapshots.expired(nowMs)) {
      const snap = await this.deps.stores.snapshots.get(id)
      if (snap) await this.remove(snap)
    }
  }

  /** A new session whose state is the snapshot's. Throws snapshot_not_found, snapshot_refused, bad_request, and what a create and a wake throw. */
  async createSession(tenant: string, body: CreateSessionBodyT): Promise<SessionT> {
    const given = (['runtime', 'limits', 'env', 'template'] as const).filter((k) => body[k] !== undefined)
    if (given.length) throw new AppError('bad_request', `${given.join(', ')} cannot be given with snapshot_id: a session from a snapshot runs as it did`)
    const snap = await this.record(tenant, body.snapshot_id ?? '')
    return (await this.copies.spawn(tenant, { ...snap, name: snap.id }, body)).session
  }

  /**
   * `count` new sessions with the session's state now. All or nothing: a failure leaves none of them.
   * Copies go in turn to this engine and to every other live engine with an API instance and room
   * for the session's memory, when the client's `authorization` is given to wake them there.
   */
  async fork(tenant: string, sid: string, body: ForkBodyT, authorization = ''): Promise<SessionT[]> {
    const { stores, config, checkpoints } = this.deps
    const count = body.count ?? 1
    const rec = await this.checkpointable(tenant, sid)
    const max = config.tenantLimits.for(tenant).max_sessions
    // Checked before the parent pauses; each copy's create checks again (copies made meanwhile elsewhere).
    const live = (await stores.sessions.tenantSessionIds(tenant)).length - (await this.hibernatedCount(tenant))
    if (live + count > max) throw quota(`a fork of ${count} needs room among the tenant's ${max} live sessions (${live} now)`)
    const remote = authorization ? this.copies.remote : null
    const engines = ['', ...(remote ? await this.deps.engines.othersWithRoom(rec.limits.memory_mb * MIB) : [])]
    const name = newId('snp')
    try {
      const copy = await this.copies.capture(rec, name)
      const source: Source = { ...copy, name, fresh: true, runtime: rec.runtime, template: rec.template ?? DEFAULT_TEMPLATE, limits: rec.limits, env: rec.env }
      // A copy lives as its parent does unless the request says otherwise.
      const opts = {
        idle_timeout_s: body.idle_timeout_s ?? rec.idle_timeout_s,
        metadata: body.metadata ?? rec.metadata,
        ...(rec.idle_action ? { idle_action: rec.idle_action } : {}),
        ...(rec.hibernated_ttl_s ? { hibernated_ttl_s: rec.hibernated_ttl_s } : {}),
      }
      // The copies are restored while the parent wakes.
      const [made, pauseMs] = await Promise.all([
        Promise.allSettled(Array.from({ length: count }, (_, i) => this.copies.spawn(tenant, source, opts, engines[i % engines.length], authorization))),
        copy.woken,
      ])
      const failed = made.find((m): m is PromiseRejectedResult => m.status === 'rejected')
      const copies = made.flatMap((m) => (m.status === 'fulfilled' ? [m.value] : []))
      if (failed) {
        await Promise.all(copies.map((c) => this.copies.discard(tenant, c.session.id, c.engine, authorization)))
        throw failed.reason
      }
      const sessions = copies.map((c) => c.session)
      this.deps.log.info(
        { sessionId: sid, copies: copies.map((c) => ({ id: c.session.id, engine: c.engine || this.deps.engine() })), pauseMs: Math.round(pauseMs) },
        'session forked',
      )
      return sessions
    } finally {
      await checkpoints.remove(name)
    }
  }

  private async hibernatedCount(tenant: string): Promise<number> {
    const ids = await this.deps.stores.sessions.tenantSessionIds(tenant)
    const recs = await Promise.all(ids.map((id) => this.deps.stores.sessions.getSession(id)))
    return recs.filter((r) => r?.status === 'hibernated').length
  }

  private async checkpointable(tenant: string, sid: string): Promise<SessionRecord> {
    const rec = await this.deps.sessions.record(tenant, sid)
    const refusal = await this.deps.driver.checkpointRefusal(rec.runtime)
    if (refusal) throw new AppError('not_supported', refusal)
    if (rec.status === 'dead') throw new AppError('session_dead', rec.status_detail || "the session's sandbox has died; there is nothing to copy")
    return rec
  }

  private async record(tenant: string, id: string): Promise<SnapshotRecord> {
    const snap = id ? await this.deps.stores.snapshots.get(id) : null
    if (!snap || snap.tenant !== tenant) throw new AppError('snapshot_not_found', `no snapshot ${id}`)
    return snap
  }
}

function bytesFull(max: number): string {
  return `the tenant's snapshots would hold more than ${max} bytes (max_snapshot_bytes); delete one first`
}

function toSnapshot(s: SnapshotRecord): SnapshotT {
  return {
    id: s.id,
    session_id: s.session_id,
    name: s.name,
    created_at: new Date(s.created_at).toISOString(),
    expires_at: new Date(s.expires_at).toISOString(),
    bytes: s.bytes,
    runtime: s.runtime as SnapshotT['runtime'],
    template: s.template,
  }
}
