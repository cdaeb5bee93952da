// POST /v1/execute runs code in a fresh sandbox through the machinery of any execution: a short-lived
// internal session (from the warm pool when its shape matches), its input files, one execution, and
// the session deleted once that execution has ended and the client has its reply (or has gone), so
// nothing of one call reaches the next. An API crash leaves the session to the reaper (short idle).
import type { Logger } from 'pino'
import type { Config } from '../config.js'
import { AppError } from '../errors.js'
import type { OneShotBodyT } from '../schemas.js'
import { checkCeilings } from '../tenants.js'
import type { Executions } from './executions.js'
import { workspacePath, type SessionFiles } from './files.js'
import type { WarmPool } from './supply/index.js'
import type { SessionService } from './session-service.js'

/** Idle seconds of a one-shot's session: how long it outlives its execution if its clean-up never runs (a crash). */
const ONE_SHOT_IDLE_S = 30

export interface OneShotRun {
  sessionId: string
  executionId: string
  /** The client has its reply, or has gone: the session goes once the execution has ended too. */
  release(): void
}

export interface OneShotDeps {
  config: Config
  sessions: SessionService
  executions: Executions
  files: SessionFiles
  /** Refills wait while a one-shot is answered (pool.hold): the pool must not compete with it. */
  pool: Pick<WarmPool, 'hold'>
  log: Logger
}

export class OneShots {
  constructor(private readonly deps: OneShotDeps) {}

  /**
   * Starts the code; resolves once its execution is logged. Counted like a session plus an execution.
   * Throws what session create, execution submit and a file put throw (invalid_path, workspace_full, payload_too_large ...).
   */
  async start(tenant: string, body: OneShotBodyT): Promise<OneShotRun> {
    const { config, sessions, executions, files } = this.deps
    const tl = config.tenantLimits.for(tenant)
    // What can be refused without a sandbox is refused first.
    checkCeilings(tl, { timeout_s: body.timeout_s })
    for (const f of body.files ?? []) workspacePath(f.path)
    const unhold = this.deps.pool.hold()
    const s = await sessions
      .create(tenant, {
        runtime: body.runtime,
        limits: body.limits,
        template: body.template,
        idle_timeout_s: Math.min(ONE_SHOT_IDLE_S, tl.max_idle_timeout_s),
        // Left behind by a crash, it is deleted at its deadline, never kept hibernated (IDLE_ACTION).
        idle_action: 'delete',
        metadata: { one_shot: 'true' },
      })
      .catch((err: unknown) => {
        unhold()
        throw err
      })
    let ended = false
    let released = false
    let removed = false
    const removeWhenFree = () => {
      if (!ended || !released || removed) return
      removed = true
      void this.remove(tenant, s.id)
    }
    try {
      for (const f of body.files ?? []) await files.write(s.id, f.path, Buffer.from(f.content_base64, 'base64'))
      const onDone = () => {
        ended = true
        removeWhenFree()
      }
      // Created here a moment ago for this tenant: submitted without reading its record again.
      const eid = await executions.submitToNew(tenant, s.id, { code: body.code, timeoutS: body.timeout_s, language: body.language, onDone })
      return {
        sessionId: s.id,
        executionId: eid,
        release: () => {
          released = true
          // The clean-up and the refill are the API's work, not the reply's: they wait for this turn of
          // the event loop to end, so the reply's last bytes (and requests already waiting) go first.
          setImmediate(() => {
            unhold()
            removeWhenFree()
          })
        },
      }
    } catch (err) {
      unhold()
      removed = true
      await this.remove(tenant, s.id)
      throw err
    }
  }

  private async remove(tenant: string, sid: string): Promise<void> {
    try {
      await this.deps.sessions.delete(tenant, sid)
    } catch (err) {
      // Already gone (the reaper, or the client deleted it): nothing left to do.
      if (err instanceof AppError && err.code === 'session_not_found') return
      this.deps.log.warn({ err, sessionId: sid }, 'could not remove a one-shot session; the reaper will')
    }
  }
}
