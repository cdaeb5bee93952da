// Waking a hibernated session: its checkpoint, verified, restored into a new container with the
// session's id, its REPL channel attached again and asked to answer; then the session is ready with
// every piece of its state as it was. Adoption (adoption.ts) calls it under the session's lease, once
// for all the requests that wait on it. A wake that cannot give the state back exactly leaves the
// session dead with the reason and keeps the checkpoint; it never hands back a fresh interpreter.
import type { Logger } from 'pino'
import type { Config } from '../config.js'
import { AppError } from '../errors.js'
import type { Metrics } from '../metrics.js'
import type { RestoredSandbox, SandboxHandle } from '../sandbox/driver.js'
import type { SessionRecord } from '../store/records.js'
import type { Stores } from '../store/stores.js'
import type { LiveSession } from './runner/index.js'
import type { ProcessRunner } from './processes/index.js'
import type { SessionRegistry } from './registry.js'
import { CheckpointMismatch, type CheckpointStore, type SandboxSource } from './supply/index.js'

/** How long a restored REPL may take to answer its first request. */
const ANSWER_TIMEOUT_MS = 10_000

export interface WakeDeps {
  config: Config
  stores: Pick<Stores, 'sessions' | 'leases'>
  log: Logger
  metrics?: Metrics
  registry: SessionRegistry
  sandboxes: Pick<SandboxSource, 'restore'>
  checkpoints: Pick<CheckpointStore, 'remove'>
  processes: Pick<ProcessRunner, 'resume'>
  /** This instance's engine id ('' unknown): the woken session's engine from now on. */
  engine: string
  attach: (rec: SessionRecord, handle: SandboxHandle, term: string) => LiveSession
  markDead: (sid: string, detail: string) => Promise<void>
}

/**
 * Wakes the hibernated session `rec` (its lease held under `term`). Throws quota_exceeded (no room in
 * max_sessions), capacity, session_moving (woken meanwhile elsewhere), session_dead (the checkpoint
 * failed its check or its restore; the session is dead and the checkpoint kept).
 */
export async function wake(deps: WakeDeps, rec: SessionRecord, term: string): Promise<LiveSession> {
  const { config, stores, log, registry } = deps
  const max = config.tenantLimits.for(rec.tenant).max_sessions
  const place = await stores.sessions.wakePlace(rec, max)
  const release = () => stores.leases.releaseLease(rec.id, config.instanceId).catch(() => undefined)
  if (place !== 'ok') {
    await release()
    if (place === 'full')
      throw new AppError(
        'quota_exceeded',
        `waking this session needs room among the tenant's ${max} live sessions (the maximum); delete or hibernate one first`,
        {
          headers: { 'retry-after': '10' },
        },
      )
    throw new AppError('session_moving', 'the session was woken meanwhile; try again', { headers: { 'retry-after': '1' } })
  }
  const t0 = performance.now()
  let handle: RestoredSandbox
  try {
    handle = await deps.sandboxes.restore(rec)
  } catch (err) {
    await release()
    if (err instanceof AppError && err.code === 'capacity') throw err
    const why =
      err instanceof CheckpointMismatch
        ? `the session's checkpoint was refused: ${err.message}; it is kept, unrestored`
        : `the session's checkpoint could not be restored (${err instanceof Error ? err.message : String(err)}); it is kept`
    log.error({ err, sessionId: rec.id }, 'wake failed')
    await deps.markDead(rec.id, why)
    throw new AppError('session_dead', why, { cause: err })
  }
  const restored = performance.now()
  const engine = deps.engine || rec.engine
  const woken: SessionRecord = { ...rec, container_id: handle.containerId, ...(engine ? { engine } : {}) }
  const live = deps.attach(woken, handle, term)
  try {
    // The restored REPL answers before anything is sent its way: it is the one that was checkpointed, alive.
    await live.client.request('ping', {}, ANSWER_TIMEOUT_MS)
  } catch (err) {
    registry.release(live)
    await release()
    const why = `the session's restored sandbox did not answer (${err instanceof Error ? err.message : String(err)}); its checkpoint is kept`
    log.error({ err, sessionId: rec.id }, 'wake failed')
    await stores.sessions.updateSession(rec.id, { container_id: handle.containerId, ...(engine ? { engine } : {}) })
    await deps.markDead(rec.id, why)
    throw new AppError('session_dead', why, { cause: err })
  }
  const answered = performance.now()
  const now = Date.now()
  await stores.leases.addInstanceSession(config.instanceId, rec.id)
  // Paused time does not count: the idle deadline starts again now.
  await stores.sessions.updateSession(rec.id, {
    status: 'ready',
    container_id: handle.containerId,
    ...(engine ? { engine } : {}),
    hibernated_at: null,
    checkpoint_digest: '',
    checkpoint_bytes: null,
    last_active_at: now,
  })
  await stores.sessions.setDeadline(rec.id, now + rec.idle_timeout_s * 1000)
  // Background processes ran on in the checkpoint: what they wrote before it comes from the REPL's buffer.
  await deps.processes.resume(live)
  await deps.checkpoints.remove(rec.id)
  // checks: the checksum, the host's memory, a leftover container; then the driver's own steps.
  const ms = { checks: restored - t0 - sum(handle.phasesMs), ...handle.phasesMs, answer: answered - restored, total: performance.now() - t0 }
  deps.metrics?.wakeSeconds.observe(ms.total / 1000)
  log.info({ sessionId: rec.id, ms: roundAll(ms) }, 'session woken')
  return live
}

const sum = (o: Record<string, number>) => Object.values(o).reduce((a, b) => a + b, 0)

export function roundAll(ms: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(ms).map(([k, v]) => [k, Math.round(v)]))
}
