// Adopting a sandbox that runs without an attached instance (after a restart of this instance, or
// from one that is gone): its running execution resumed from what it wrote meanwhile, its queue run
// again, its background processes picked up; a sandbox that stopped meanwhile marks the session dead.
// An execution that waited is sent to the REPL as its start is recorded: one the REPL got while Redis
// still has it queued is resumed as running, never sent a second time. One recorded as running that
// the REPL never got (its instance let the session go in between) is sent now.
import type { Config } from '../config.js'
import { AppError } from '../errors.js'
import type { SandboxDriver, SandboxHandle } from '../sandbox/driver.js'
import type { ReplFrame } from '../repl/protocol.js'
import type { ExecutionRecord, SessionRecord } from '../store/records.js'
import type { Stores } from '../store/stores.js'
import type { Logger } from 'pino'
import {
  executionFrames,
  newPendingExecution,
  type DrivenLogs,
  type ExecutionRunner,
  type LiveSession,
  type PendingExecution,
  type RecordedExecutions,
} from './runner/index.js'
import type { ProcessRunner } from './processes/index.js'
import type { SessionRegistry } from './registry.js'

export interface AdoptRunningDeps {
  config: Config
  stores: Pick<Stores, 'sessions' | 'leases' | 'executions' | 'logs'>
  driver: SandboxDriver
  log: Logger
  registry: SessionRegistry
  runner: ExecutionRunner
  recorded: RecordedExecutions
  driven: DrivenLogs
  processes: Pick<ProcessRunner, 'resume'>
  markDead: (sid: string, detail?: string) => Promise<void>
  /** Attaches this instance to the sandbox (Adoption.attach, adopted) under lease term `term`. */
  attach: (rec: SessionRecord, handle: SandboxHandle, term: string) => LiveSession
}

/** Attaches to the session's running sandbox under lease term `term`. Throws session_dead, sandbox_failed. */
export async function adoptRunning(deps: AdoptRunningDeps, rec: SessionRecord, term: string): Promise<LiveSession> {
  const { stores, driver, config, recorded, registry, runner, driven } = deps
  const state = rec.container_id ? await driver.inspectExit(rec.container_id) : { running: false, oomKilled: false, exitCode: null }
  const all = await recorded.unfinished(rec)
  // An LLM turn lives only in the process that drives it: if that is not this one, nobody will end it.
  for (const turn of all.filter((x) => x.kind === 'turn' && !driven.drives(x.id))) {
    await recorded.endOrphaned(rec, turn, 'killed', 'the API instance running this LLM turn stopped; send the message again')
  }
  const unfinished = all.filter((x) => x.kind !== 'turn')
  if (!state.running) {
    // A sandbox that stopped while it was being checkpointed: the instance doing it stopped before the checkpoint was recorded.
    const lost = rec.hibernating_at ? 'the API instance stopped while it was hibernating this session; its state was lost' : undefined
    await deps.markDead(rec.id, lost)
    for (const ex of unfinished)
      await recorded.endOrphaned(rec, ex, state.oomKilled ? 'oom' : 'killed', 'the sandbox stopped while no API instance was attached')
    throw new AppError('session_dead', lost ?? "the session's sandbox is gone; restart it or create a new session")
  }
  const handle = await driver.adopt(rec.container_id, rec.id)
  const live = deps.attach(rec, handle, term)
  try {
    let running = unfinished.find((ex) => ex.status === 'running')
    const oldest = running ? undefined : unfinished.findLast((ex) => ex.status === 'queued')
    const next = oldest?.kind === 'stream' ? undefined : oldest
    // Frames of the running execution that arrive now wait until those written while detached are replayed.
    const early: ReplFrame[] = []
    if (running ?? next) live.client.track((running ?? next)!.id, (f) => early.push(f))
    await stores.leases.addInstanceSession(config.instanceId, rec.id)
    if (next) running = await startedMeanwhile(deps, live, next, early)
    if (next && !running) live.client.forget(next.id)
    const unsent = running && !next && (await neverSent(deps, live, running, early)) ? running : undefined
    if (unsent) {
      live.client.forget(unsent.id)
      running = undefined
    }
    if (running) await runner.resume(live, running, early)
    // Background processes went on too: what they wrote meanwhile comes from the REPL's replay buffer.
    await deps.processes.resume(live)
    const requeued: PendingExecution[] = []
    const queued = unfinished.filter((x) => x.status === 'queued' && x.id !== running?.id).reverse()
    for (const ex of unsent ? [unsent, ...queued] : queued) {
      // Streamed code came from an instance that is gone: nobody sends the rest of it.
      if (ex.kind === 'stream') {
        await recorded.endOrphaned(rec, ex, 'killed', 'the API instance that was streaming this code stopped')
        continue
      }
      const again = newPendingExecution(ex.id, ex.code ?? '', ex.timeout_ms ?? config.EXEC_TIMEOUT_S * 1000)
      if (ex.language === 'bash') again.language = 'bash'
      // Its start (and `running` status) is recorded already: it is only sent.
      if (ex === unsent) [again.startedAt, again.announcedRunning] = [ex.started_at ?? ex.created_at, true]
      requeued.push(again)
    }
    if (!running) await stores.sessions.updateSession(rec.id, { status: requeued.length ? 'busy' : 'ready' })
    runner.requeue(live, requeued)
    deps.log.info({ sessionId: rec.id, resumed: running?.id, sent: unsent?.id, requeued: requeued.length }, 'session adopted')
    return live
  } catch (err) {
    registry.release(live)
    await stores.leases.releaseLease(rec.id, config.instanceId).catch(() => undefined)
    if (err instanceof AppError) throw err
    throw new AppError('sandbox_failed', "the session's sandbox could not be re-attached", { cause: err })
  }
}

/**
 * `next`, the oldest execution Redis has queued, as running when the REPL got it (its frames are in
 * the sandbox's log, or arrive now): the instance before sent it and stopped before its start was
 * recorded. Its start is recorded now, with its `running` status, from its creation time (its log is
 * read from then, and its time limit counts from then). Undefined when the REPL never got it: it
 * runs from the queue.
 */
async function startedMeanwhile(deps: AdoptRunningDeps, live: LiveSession, next: ExecutionRecord, early: ReplFrame[]): Promise<ExecutionRecord | undefined> {
  const raw = await deps.driver.readStdoutLog(live.containerId, next.created_at).catch((err: unknown) => {
    deps.log.warn({ err, sessionId: live.id }, 'could not read the sandbox log')
    return Buffer.alloc(0)
  })
  if (early.length === 0 && executionFrames(raw, next.id).length === 0) return undefined
  const { config } = deps
  const status = { type: 'status', state: 'running', execution_id: next.id }
  // As the runner reckons a busy session's deadline: after the execution's limit, its grace and the idle time.
  const deadline = next.created_at + (next.timeout_ms ?? config.EXEC_TIMEOUT_S * 1000) + config.INTERRUPT_GRACE_MS + live.idleTimeoutS * 1000
  await deps.stores.executions.recordStart(live.id, next.id, next.created_at, status, deadline, live.tenant)
  deps.log.warn({ sessionId: live.id, executionId: next.id }, 'the REPL got a queued execution before its start was recorded: it is resumed, not run again')
  return { ...next, status: 'running', started_at: next.created_at }
}

/**
 * Whether the REPL never got `rx`, which Redis has as running: no frame of it was handled, its
 * sandbox's log has none since its start, and none arrives now. An instance let the session go
 * between recording an execution's start and sending it (ExecutionRunner.enqueue); resumed, it
 * would wait for frames that never come. False when the log cannot be read.
 */
async function neverSent(deps: AdoptRunningDeps, live: LiveSession, rx: ExecutionRecord, early: ReplFrame[]): Promise<boolean> {
  if (early.length > 0 || (await deps.stores.logs.resumePoint(live.id, rx.id)).pos > 0) return false
  const raw = await deps.driver.readStdoutLog(live.containerId, rx.started_at ?? rx.created_at).catch(() => null)
  return raw !== null && executionFrames(raw, rx.id).length === 0
}
