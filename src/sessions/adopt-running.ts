// Adopting a sandbox that runs without an attached instance (after a restart of this instance, or
// from one that is gone): its running execution resumed from what it wrote meanwhile, its queue run
// again, its background processes picked up; a sandbox that stopped meanwhile marks the session dead.
import type { Config } from '../config.js'
import { AppError } from '../errors.js'
import type { SandboxDriver, SandboxHandle } from '../sandbox/driver.js'
import type { ReplFrame } from '../repl/protocol.js'
import type { SessionRecord } from '../store/records.js'
import type { Stores } from '../store/stores.js'
import type { Logger } from 'pino'
import { newPendingExecution, type DrivenLogs, type ExecutionRunner, type LiveSession, type PendingExecution, type RecordedExecutions } from './runner/index.js'
import type { ProcessRunner } from './processes/index.js'
import type { SessionRegistry } from './registry.js'

export interface AdoptRunningDeps {
  config: Config
  stores: Pick<Stores, 'sessions' | 'leases'>
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
    const running = unfinished.find((ex) => ex.status === 'running')
    // Frames of the running execution that arrive now wait until those written while detached are replayed.
    const early: ReplFrame[] = []
    if (running) live.client.track(running.id, (f) => early.push(f))
    await stores.leases.addInstanceSession(config.instanceId, rec.id)
    if (running) await runner.resume(live, running, early)
    // Background processes went on too: what they wrote meanwhile comes from the REPL's replay buffer.
    await deps.processes.resume(live)
    const requeued: PendingExecution[] = []
    for (const ex of unfinished.filter((x) => x.status === 'queued').reverse()) {
      // Streamed code came from an instance that is gone: nobody sends the rest of it.
      if (ex.kind === 'stream') {
        await recorded.endOrphaned(rec, ex, 'killed', 'the API instance that was streaming this code stopped')
        continue
      }
      const again = newPendingExecution(ex.id, ex.code ?? '', ex.timeout_ms ?? config.EXEC_TIMEOUT_S * 1000)
      if (ex.language === 'bash') again.language = 'bash'
      requeued.push(again)
    }
    if (!running) await stores.sessions.updateSession(rec.id, { status: requeued.length ? 'busy' : 'ready' })
    runner.requeue(live, requeued)
    deps.log.info({ sessionId: rec.id, resumed: running?.id, requeued: requeued.length }, 'session adopted')
    return live
  } catch (err) {
    registry.release(live)
    await stores.leases.releaseLease(rec.id, config.instanceId).catch(() => undefined)
    if (err instanceof AppError) throw err
    throw new AppError('sandbox_failed', "the session's sandbox could not be re-attached", { cause: err })
  }
}
