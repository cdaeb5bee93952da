// Snapshots and forks: a copy of a runsc session's state (memory, workspace, processes) at one
// moment, and new sessions started from such a copy. runsc here cannot checkpoint and leave the
// sandbox running (`--leave-running` panics "paused => stopped" and ends it), so a copy is taken
// by hibernating the session, linking its checkpoint aside while requests wait, and waking it: the
// session keeps its id and state, and pauses for the hibernation and the wake. A new session is
// made hibernated, from a linked copy whose checksum is the source's, and woken like any other.
import type { Logger } from 'pino'
import type { Config } from '../config.js'
import { AppError } from '../errors.js'
import type { CreateSessionBodyT, ForkBodyT, SessionT, SnapshotT } from '../schemas.js'
import type { SandboxDriver } from '../sandbox/driver.js'
import type { SessionRecord } from '../store/records.js'
import type { SnapshotRecord } from '../store/snapshot-store.js'
import type { Stores } from '../store/stores.js'
import { DEFAULT_TEMPLATE } from '../templates.js'
import { newId } from './ids.js'
import type { SessionService } from './session-service.js'
import { CheckpointMismatch, type CheckpointStore, type Engines, resolveSessionLimits, type SealedCheckpoint } from './supply/index.js'

const MIB = 1024 * 1024

/**
 * Fork copies on other engines (given by the app, src/http/remote-copies.ts: the sessions layer
 * does not reach other instances itself). `authorization` is the client's Authorization header:
 * the instance there authenticates the tenant by its key, as for any request.
 */
export interface RemoteCopies {
  /** Wakes the hibernated copy `sid` at an instance on `engine`. Throws the error that instance answered. */
  wake(engine: string, sid: string, authorization: string): Promise<void>
  /** Deletes `sid` (its sandbox and checkpoint) through an instance on `engine`. */
  delete(engine: string, sid: string, authorization: string): Promise<void>
}

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

/** A copy made: on this engine (`engine` '') or on another, through its instances. */
interface Made {
  session: SessionT
  engine: string
}

/** A session's checkpoint copied aside (capture). */
interface Capture extends SealedCheckpoint {
  execution_count: number
  /** Resolves once the session is awake again: its pause in ms (NaN: the wake failed). */
  woken: Promise<number>
}

/** A checkpoint to start sessions from: a snapshot's, or a fork's copy. */
interface Source {
  name: string
  digest: string
  bytes: number
  execution_count: number
  runtime: string
  template: string
  limits: SessionRecord['limits']
  env: Record<string, string>
  /** Written just now (a fork's): each copy's wake checks it, so it is not read once more before. */
  fresh?: boolean
}

export class Snapshots {
  private remote: RemoteCopies | null = null
  constructor(private readonly deps: SnapshotsDeps) {}

  /** From now on a fork may place copies on other engines (the app wires this once the cluster exists). */
  placeCopiesWith(remote: RemoteCopies): void {
    this.remote = remote
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
      const copy = await this.capture(rec, id)
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
    return (await this.spawn(tenant, { ...snap, name: snap.id }, body)).session
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
    const remote = authorization ? this.remote : null
    const engines = ['', ...(remote ? await this.deps.engines.othersWithRoom(rec.limits.memory_mb * MIB) : [])]
    const name = newId('snp')
    try {
      const copy = await this.capture(rec, name)
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
        Promise.allSettled(Array.from({ length: count }, (_, i) => this.spawn(tenant, source, opts, engines[i % engines.length], authorization))),
        copy.woken,
      ])
      const failed = made.find((m): m is PromiseRejectedResult => m.status === 'rejected')
      const copies = made.flatMap((m) => (m.status === 'fulfilled' ? [m.value] : []))
      if (failed) {
        await Promise.all(copies.map((c) => this.discard(tenant, c.session.id, c.engine, authorization)))
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

  /** Deletes a copy of a fork that failed, here or through its engine's instances (never throws: logged). */
  private async discard(tenant: string, sid: string, engine: string, authorization: string): Promise<void> {
    try {
      if (engine && this.remote) {
        await this.remote.delete(engine, sid, authorization)
        // Its folder as linked here, should the instance there not read CHECKPOINT_DIR where this one does.
        await this.deps.checkpoints.remove(sid)
      } else await this.deps.sessions.delete(tenant, sid)
    } catch (err) {
      this.deps.log.error({ err, sessionId: sid, engine }, 'a copy of a failed fork could not be deleted; the reaper ends it')
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

  /**
   * The session's checkpoint now, linked into the store as `name` with its checksum (the one sealed
   * with the hibernation); the session is being woken when this returns (`woken`: the pause in ms,
   * NaN when the wake failed and the session says why). A hibernated session is woken first (its
   * state may be copied only through its sandbox's).
   */
  private async capture(rec: SessionRecord, name: string): Promise<Capture> {
    const { sessions, checkpoints, log } = this.deps
    if (rec.status === 'hibernated') await sessions.usable(rec)
    let copied: { part: string; sealed: SealedCheckpoint } | null = null
    let failure: unknown = null
    const t0 = performance.now()
    const taken = await sessions.hibernate(rec.tenant, rec.id, async (dir, sealed) => {
      try {
        copied = { part: await checkpoints.linkCopy(dir, name), sealed }
      } catch (err) {
        failure = err
      }
    })
    // Woken at once (requests that came meanwhile wait for this wake), while the copies are made.
    const woken = sessions.wake(rec.tenant, rec.id).then(
      () => performance.now() - t0,
      (err: unknown) => {
        log.error({ err, sessionId: rec.id }, 'the session could not be woken after its checkpoint was copied')
        return NaN
      },
    )
    const copy = copied as { part: string; sealed: SealedCheckpoint } | null
    if (failure || !copy) {
      await woken
      throw new AppError('sandbox_failed', 'the checkpoint could not be copied', { cause: failure })
    }
    await checkpoints.place(copy.part, name)
    return { ...copy.sealed, execution_count: taken.execution_count, woken }
  }

  /**
   * A new session from `src`: made hibernated on a linked copy of its checkpoint, then woken, here
   * or (`engine` given) by an instance on that engine, which reads the copy from the shared
   * CHECKPOINT_DIR and checks it against the checksum recorded here.
   */
  private async spawn(
    tenant: string,
    src: Source,
    body: Pick<CreateSessionBodyT, 'idle_timeout_s' | 'metadata' | 'idle_action' | 'hibernated_ttl_s'>,
    engine = '',
    authorization = '',
  ): Promise<Made> {
    const { config, stores, checkpoints, sessions } = this.deps
    try {
      if (!src.fresh) await checkpoints.verify(src.name, src.digest)
    } catch (err) {
      if (err instanceof CheckpointMismatch) throw new AppError('snapshot_refused', `the snapshot was not restored: ${err.message}; it is kept`, { cause: err })
      throw err
    }
    const { idle, maxSessions, hibernatedTtl } = resolveSessionLimits(config, tenant, {
      idle_timeout_s: body.idle_timeout_s,
      hibernated_ttl_s: body.hibernated_ttl_s,
    })
    const now = Date.now()
    const rec: SessionRecord = {
      id: newId('ses'),
      tenant,
      status: 'hibernated',
      created_at: now,
      last_active_at: now,
      idle_timeout_s: idle,
      idle_action: body.idle_action ?? config.IDLE_ACTION,
      hibernated_ttl_s: hibernatedTtl,
      hibernated_at: now,
      checkpoint_digest: src.digest,
      checkpoint_bytes: src.bytes,
      runtime: src.runtime as SessionRecord['runtime'],
      limits: src.limits,
      metadata: body.metadata ?? {},
      env: src.env,
      container_id: '',
      execution_count: src.execution_count,
      template: src.template,
      ...(engine || this.deps.engine() ? { engine: engine || this.deps.engine() } : {}),
    }
    await checkpoints.place(await checkpoints.linkCopy(checkpoints.dir(src.name), rec.id), rec.id)
    // Among the tenant's live sessions from the start (max_sessions); the wake finds its place taken.
    if (!(await stores.sessions.createSession(rec, now + idle * 1000 + config.SANDBOX_START_TIMEOUT_MS, maxSessions))) {
      await checkpoints.remove(rec.id)
      throw quota(`tenant already has ${maxSessions} sessions (the maximum); delete one first`)
    }
    if (engine && this.remote) {
      try {
        await this.remote.wake(engine, rec.id, authorization)
      } catch (err) {
        await this.discard(tenant, rec.id, engine, authorization)
        throw err
      }
      return { session: await sessions.get(tenant, rec.id), engine }
    }
    try {
      await sessions.usable(rec)
    } catch (err) {
      await sessions.destroy((await stores.sessions.getSession(rec.id)) ?? rec, 'killed').catch(() => undefined)
      throw err
    }
    return { session: await sessions.get(tenant, rec.id), engine: '' }
  }

  private async record(tenant: string, id: string): Promise<SnapshotRecord> {
    const snap = id ? await this.deps.stores.snapshots.get(id) : null
    if (!snap || snap.tenant !== tenant) throw new AppError('snapshot_not_found', `no snapshot ${id}`)
    return snap
  }
}

function quota(detail: string): AppError {
  return new AppError('quota_exceeded', detail, { headers: { 'retry-after': '10' } })
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
