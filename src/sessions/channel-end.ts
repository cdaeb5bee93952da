// What happens when a sandbox's REPL channel closes without the host asking: the client gave up on a
// misbehaving sandbox (it is killed and its session is dead), only the attach stream broke (the
// sandbox is attached again), or the sandbox itself exited (its executions end saying why).
import type { Logger } from 'pino'
import type { SandboxDriver } from '../sandbox/driver.js'
import type { SandboxMisbehaved } from '../repl/repl-client.js'
import type { SessionRecord } from '../store/records.js'
import type { Stores } from '../store/stores.js'
import type { ExecutionRunner, LiveSession } from './runner/index.js'
import type { SessionRegistry } from './registry.js'

export interface ChannelEndDeps {
  stores: Pick<Stores, 'sessions'>
  driver: SandboxDriver
  log: Logger
  registry: SessionRegistry
  runner: ExecutionRunner
  /** Records that the session's sandbox is gone for good. */
  markDead: (sid: string) => Promise<void>
  /** Attaches this instance to the session's sandbox again. */
  reattach: (rec: SessionRecord) => Promise<unknown>
}

/**
 * The client gave up on the sandbox (it stopped reading its input, or kept breaking the protocol):
 * its executions end with an error saying why, its container is killed, and the session is dead
 * (as after a crash: `restart` gives it a fresh interpreter). Nothing of it touches other sessions.
 */
export async function sandboxMisbehaved(deps: ChannelEndDeps, rec: SessionRecord, live: LiveSession, why: SandboxMisbehaved): Promise<void> {
  const { driver, registry, runner, log } = deps
  if (live.state !== 'attached') return
  live.state = 'stopping'
  log.warn({ sessionId: rec.id, reason: why.reason }, 'sandbox misbehaved; ending its session')
  const killed = driver.kill(live.containerId).then(
    () => true,
    (err: unknown) => {
      log.warn({ err, sessionId: rec.id }, 'could not kill a misbehaving sandbox; the reaper removes it')
      return false
    },
  )
  // Dead before its executions end: a client that reads the session after their `done` sees it so.
  await markDead(deps, rec.id)
  const [, wasKilled] = await Promise.all([runner.sandboxMisbehaved(live, why.reason), killed])
  registry.release(live)
  if (!wasKilled) await deps.stores.sessions.setDeadline(rec.id, Date.now())
}

/** The REPL channel closed without the host asking: re-attach when only the stream broke, else the sandbox died. */
export async function channelClosed(deps: ChannelEndDeps, rec: SessionRecord, live: LiveSession): Promise<void> {
  const { driver, registry, runner, log } = deps
  if (live.state !== 'attached') return
  let exit: Awaited<ReturnType<SandboxDriver['inspectExit']>>
  try {
    exit = await driver.inspectExit(live.containerId)
  } catch (err) {
    // The engine cannot say: let go; the next request for the session adopts it again.
    log.warn({ err, sessionId: rec.id }, 'attach stream closed and the engine is unreachable; detaching')
    registry.release(live)
    return
  }
  if (live.state !== 'attached') return
  if (exit.running) {
    log.warn({ sessionId: rec.id }, 'attach stream closed; re-attaching')
    registry.release(live)
    await deps.reattach(rec)
    return
  }
  live.state = 'stopping'
  log.warn({ sessionId: rec.id, exitCode: exit.exitCode, oomKilled: exit.oomKilled }, 'sandbox exited')
  await markDead(deps, rec.id)
  await runner.sandboxGone(live, exit)
  registry.release(live)
}

/** Marks the session dead; its executions still end (with the reason) when Redis refuses that. */
async function markDead(deps: ChannelEndDeps, sid: string): Promise<void> {
  await deps.markDead(sid).catch((err: unknown) => deps.log.error({ err, sessionId: sid }, 'could not mark the session dead'))
}
