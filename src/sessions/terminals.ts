// A session's terminals (GET /v1/sessions/{id}/pty), on the instance that holds the session: each an
// interactive bash in its sandbox (sandbox/sandbox-terminal.ts), at most MAX_TERMINALS_PER_SESSION at
// once, all ended when the session is let go here (deleted, restarted, dead, handed to another
// instance), what they started killed with them, and their use counted as the session's activity.
import type { Logger } from 'pino'
import type { Config } from '../config.js'
import { AppError } from '../errors.js'
import type { SandboxDriver, Terminal } from '../sandbox/driver.js'
import { SandboxNotRunningError } from '../sandbox/sandbox-exec.js'
import type { TerminalSize } from '../sandbox/sandbox-terminal.js'
import type { Stores } from '../store/stores.js'
import { recordActivity } from './activity.js'
import type { SessionRegistry } from './registry.js'
import type { SessionService } from './session-service.js'
import type { Engines } from './supply/index.js'

/** The most often a terminal in use moves its session's idle deadline (a Redis read and two writes). */
const ACTIVITY_EVERY_MS = 5000
/** How long close() waits for the terminals' kills when the service stops. */
const CLOSE_WAIT_MS = 5000

/** How a terminal's use ended: its shell exited, or the session was let go here (why says so). */
type TerminalOutcome = { kind: 'exit'; exitCode: number | null } | { kind: 'released'; why: string }

/** One open terminal as the HTTP layer holds it. */
export interface SessionTerminal {
  readonly sessionId: string
  /** The shell's output (pause it to stop reading), its input, and resize. */
  readonly terminal: Pick<Terminal, 'output' | 'input' | 'resize'>
  /** Resolves once the terminal is over by the shell or the session (not by close()). */
  readonly outcome: Promise<TerminalOutcome>
  /** Keystrokes or output: the session is in use (its idle deadline moves, at most every few seconds). */
  activity(): void
  /** The client left: the shell and everything it started are killed. Safe to call twice. */
  close(): Promise<void>
}

export interface TerminalsDeps {
  config: Config
  stores: Pick<Stores, 'sessions'>
  sessions: Pick<SessionService, 'record' | 'usable'>
  driver: Pick<SandboxDriver, 'openTerminal'>
  registry: SessionRegistry
  engines: Pick<Engines, 'mustBeHere'>
  log: Logger
}

interface Entry {
  close(why: string | null): Promise<void>
}

export class SessionTerminals {
  /** Open (and opening) terminals by session id. */
  private readonly bySession = new Map<string, Set<Entry>>()
  /** Kills under way, for close() to wait on. */
  private readonly ending = new Set<Promise<void>>()

  constructor(private readonly deps: TerminalsDeps) {
    deps.registry.onRelease((live) => {
      for (const e of this.bySession.get(live.id) ?? []) void e.close("the session's sandbox was let go here (deleted, restarted, stopped or moved)")
    })
  }

  /**
   * Opens a terminal of `size` in the tenant's session, attached here. Throws session_not_found,
   * session_dead, too_many_terminals, session_moving, sandbox_failed.
   */
  async open(tenant: string, sid: string, size: TerminalSize): Promise<SessionTerminal> {
    const { config, sessions, driver, engines, log } = this.deps
    let rec = await sessions.record(tenant, sid)
    if (rec.status === 'hibernated') {
      await sessions.usable(rec)
      rec = await sessions.record(tenant, sid)
    }
    if (rec.status === 'dead' || !rec.container_id)
      throw new AppError('session_dead', rec.status_detail || "the session's sandbox has died; restart it or create a new session")
    await engines.mustBeHere(rec)
    const live = await sessions.usable(rec)
    const mine = this.bySession.get(sid) ?? new Set<Entry>()
    if (mine.size >= config.MAX_TERMINALS_PER_SESSION)
      throw new AppError(
        'too_many_terminals',
        `session ${sid} has ${mine.size} open terminals, the most it may have (MAX_TERMINALS_PER_SESSION); close one first`,
      )
    let released: string | null = null
    let terminal: Terminal | null = null
    let resolveOutcome!: (o: TerminalOutcome) => void
    const outcome = new Promise<TerminalOutcome>((resolve) => (resolveOutcome = resolve))
    let ended: Promise<void> | null = null
    const entry: Entry = {
      close: (why) => {
        if (why !== null && released === null) {
          released = why
          resolveOutcome({ kind: 'released', why })
        }
        if (ended) return ended
        if (terminal) log.info({ sessionId: sid, why: why ?? 'closed by its client or its shell' }, 'terminal closed')
        ended = this.track((terminal?.close() ?? Promise.resolve()).finally(() => this.forget(sid, entry)))
        return ended
      },
    }
    // The place is taken before the exec starts, so terminals opened at once count each other.
    mine.add(entry)
    this.bySession.set(sid, mine)
    try {
      terminal = await driver.openTerminal(live.containerId, config.SANDBOX_USER, size)
    } catch (err) {
      this.forget(sid, entry)
      if (err instanceof SandboxNotRunningError)
        throw new AppError('session_dead', "the session's sandbox is not running (it died, or is restarting)", { cause: err })
      log.warn({ err, sessionId: sid }, 'could not start a terminal')
      throw new AppError('sandbox_failed', 'the terminal could not be started in the sandbox', { cause: err })
    }
    // Let go while the shell was starting (entry.close ran without it): it goes at once.
    if (released !== null || live.state !== 'attached') {
      this.forget(sid, entry)
      void this.track(terminal.close())
      throw new AppError('session_not_found', `session ${sid} was deleted, restarted or moved while the terminal started; try again`)
    }
    // The shell ended by itself (or its connection broke): what it left running is killed all the same.
    void terminal.ended.then((end) => {
      if (end.by === 'close') return
      if (end.by === 'exit') resolveOutcome({ kind: 'exit', exitCode: end.exitCode })
      void entry.close(end.by === 'lost' ? 'the connection to the sandbox was lost' : null)
    })
    log.info({ sessionId: sid, tenant, terminals: mine.size }, 'terminal opened')
    let lastActivity = 0
    const activityEveryMs = Math.min(ACTIVITY_EVERY_MS, (live.idleTimeoutS * 1000) / 2)
    const opened = terminal
    return {
      sessionId: sid,
      terminal: opened,
      outcome,
      activity: () => {
        const now = Date.now()
        if (now - lastActivity < activityEveryMs) return
        lastActivity = now
        void sessions
          .record(tenant, sid)
          .then((r) => recordActivity(this.deps.stores, log, r, 'terminal'))
          .catch(() => undefined) // the session is gone: the terminal is about to end too
      },
      close: () => entry.close(null),
    }
  }

  /** The service is stopping: every terminal ends (their kills waited for, a bounded time). */
  async close(): Promise<void> {
    for (const set of [...this.bySession.values()]) for (const e of set) void e.close('the API instance is stopping')
    let timer: NodeJS.Timeout | undefined
    await Promise.race([Promise.all(this.ending), new Promise((resolve) => (timer = setTimeout(resolve, CLOSE_WAIT_MS).unref()))])
    clearTimeout(timer)
  }

  private track(p: Promise<void>): Promise<void> {
    const tracked = p.catch(() => undefined)
    this.ending.add(tracked)
    void tracked.finally(() => this.ending.delete(tracked))
    return tracked
  }

  private forget(sid: string, entry: Entry): void {
    const set = this.bySession.get(sid)
    if (!set) return
    set.delete(entry)
    if (!set.size) this.bySession.delete(sid)
  }
}
