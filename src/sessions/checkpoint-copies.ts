// Copies of a session's state, for snapshots and forks (snapshots.ts): its checkpoint linked aside
// while the session pauses (capture), and new sessions made hibernated from such a copy and woken,
// here or through an instance on another engine (spawn), or deleted again when a fork fails (discard).
import type { Logger } from 'pino'
import type { Config } from '../config.js'
import { AppError } from '../errors.js'
import type { CreateSessionBodyT, SessionT } from '../schemas.js'
import type { SessionRecord } from '../store/records.js'
import type { Stores } from '../store/stores.js'
import { newId } from './ids.js'
import type { SessionService } from './session-service.js'
import { CheckpointMismatch, type CheckpointStore, resolveSessionLimits, type SealedCheckpoint } from './supply/index.js'

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

export interface CheckpointCopiesDeps {
  config: Config
  stores: Pick<Stores, 'sessions'>
  sessions: SessionService
  checkpoints: CheckpointStore
  log: Logger
  /** This instance's engine id ('' unknown). */
  engine: () => string
}

/** A copy made: on this engine (`engine` '') or on another, through its instances. */
export interface Made {
  session: SessionT
  engine: string
}

/** A session's checkpoint copied aside (capture). */
export interface Capture extends SealedCheckpoint {
  execution_count: number
  /** Resolves once the session is awake again: its pause in ms (NaN: the wake failed). */
  woken: Promise<number>
}

/** A checkpoint to start sessions from: a snapshot's, or a fork's copy. */
export interface Source {
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

export class CheckpointCopies {
  /** How copies reach other engines; null until the app wires it (placeWith). */
  remote: RemoteCopies | null = null
  constructor(private readonly deps: CheckpointCopiesDeps) {}

  placeWith(remote: RemoteCopies): void {
    this.remote = remote
  }

  /**
   * The session's checkpoint now, linked into the store as `name` with its checksum (the one sealed
   * with the hibernation); the session is being woken when this returns (`woken`: the pause in ms,
   * NaN when the wake failed and the session says why). A hibernated session is woken first (its
   * state may be copied only through its sandbox's).
   */
  async capture(rec: SessionRecord, name: string): Promise<Capture> {
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
  async spawn(
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

  /** Deletes a copy of a fork that failed, here or through its engine's instances (never throws: logged). */
  async discard(tenant: string, sid: string, engine: string, authorization: string): Promise<void> {
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
}

export function quota(detail: string): AppError {
  return new AppError('quota_exceeded', detail, { headers: { 'retry-after': '10' } })
}
