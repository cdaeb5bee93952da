// Background processes on the instance that holds their session: started, fed, signalled and killed
// through the session's REPL (which answers these beside any running execution), their frames
// turned into events in order (process-log.ts), picked up again after an adoption from the REPL's own
// replay buffer, and ended with their sandbox.
import type { Logger } from 'pino'
import type { Config } from '../../config.js'
import { AppError } from '../../errors.js'
import { keepTextJson } from '../../event-json.js'
import type { SignalT } from '../../schemas.js'
import { ReplRequestError } from '../../repl/repl-client.js'
import { isProcessFrame, type ProcessFrame } from '../../repl/protocol.js'
import type { EventFeed } from '../../store/event-feed.js'
import type { ProcessRecord } from '../../store/records.js'
import type { Stores } from '../../store/stores.js'
import type { LiveSession } from '../runner/index.js'
import { ProcessLog, type LiveProcess } from './process-log.js'

/** How long the REPL may take to answer a request about a process (a kill waits up to 5 s for the group to go). */
const REQUEST_TIMEOUT_MS = 10_000
/** Processes a session lists: beyond, the oldest exited ones are forgotten. */
const LISTED_PER_SESSION = 100
/** Frames of one process kept while its missed output is replayed; past it they are dropped and the gap reported. */
const EARLY_MAX_FRAMES = 64
/** A process killed by SIGKILL exits with 128 + 9, as the REPL reports it (and as a shell would). */
const SIGKILL_EXIT_CODE = 137

export interface ProcessRunnerDeps {
  config: Config
  stores: Pick<Stores, 'processes' | 'logs'>
  feed: Pick<EventFeed, 'deliver'>
  log: Logger
  /** Redis refused a write: the session's lease passed to another instance. */
  letGo?: (live: LiveSession, why: 'lost') => void
}

export interface ProcessStartRequest {
  id: string
  command: string
  cwd?: string
  env?: Record<string, string>
}

/** A count a frame reports: a non-negative safe integer, else nothing (sandbox code can forge frames). */
const countOf = (v: unknown): number | undefined => (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? v : undefined)

export class ProcessRunner {
  /** Each attached session's processes that run here, by id. */
  private readonly sessions = new WeakMap<LiveSession, Map<string, LiveProcess>>()
  /** Ends being recorded, by session: a sandbox's end waits for them before it ends the rest. */
  private readonly endings = new Map<string, Set<Promise<boolean>>>()
  private readonly events: ProcessLog

  constructor(private readonly deps: ProcessRunnerDeps) {
    this.events = new ProcessLog(deps)
  }

  /** A session attached here: its processes' frames come to this runner (none is tracked until started or resumed). */
  attach(live: LiveSession): void {
    this.sessions.set(live, new Map())
    live.client.onProcessFrame((f) => this.onFrame(live, f))
  }

  /** This instance let go of the session: whoever attaches next picks its processes up. */
  abandon(live: LiveSession): void {
    this.sessions.delete(live)
  }

  /**
   * Records the process (refused past the tenant's max_processes for the session), then has the
   * REPL start it. Throws too_many_processes, invalid_cwd, session_not_found, session_dead,
   * session_moving, sandbox_failed.
   */
  async start(live: LiveSession, req: ProcessStartRequest): Promise<ProcessRecord> {
    const { config, stores } = this.deps
    const max = config.tenantLimits.for(live.tenant).max_processes
    const now = Date.now()
    const rec: ProcessRecord = {
      id: req.id,
      session_id: live.id,
      tenant: live.tenant,
      command: req.command,
      cwd: req.cwd ?? '',
      status: 'running',
      exit_code: null,
      started_at: now,
      ended_at: null,
    }
    const started = await stores.processes.start(rec, { max, keep: LISTED_PER_SESSION, idleDeadlineMs: now + live.idleTimeoutS * 1000 }, live.term)
    if (started.result === 'too_many')
      throw new AppError('too_many_processes', `${max} processes already run in this session (the maximum); stop one first`, { extra: { maximum: max } })
    if (started.result === 'no_session') throw new AppError('session_not_found', `no session ${live.id}`)
    if (started.result === 'dead') throw new AppError('session_dead', started.why || "the session's sandbox has died; restart it or create a new session")
    if (started.result === 'lost') {
      this.deps.letGo?.(live, 'lost')
      throw moving()
    }
    const proc: LiveProcess = { id: req.id, live, pos: 0, early: null, loggedBytes: 0, droppedBytes: 0, ended: false, ending: null }
    // Tracked before the REPL is asked: its first frames may come before the reply.
    this.procsOf(live).set(proc.id, proc)
    try {
      const fields = { proc_id: req.id, command: req.command, cwd: req.cwd ?? null, env: req.env ?? {}, max_output_bytes: config.PROCESS_OUTPUT_BYTES }
      await live.client.request('proc_start', fields, REQUEST_TIMEOUT_MS)
    } catch (err) {
      if (err instanceof ReplRequestError && err.code === 'bad_cwd') {
        this.procsOf(live).delete(proc.id)
        proc.ended = true
        await stores.processes.remove(live.tenant, live.id, proc.id)
        throw new AppError('invalid_cwd', err.message)
      }
      // Not started, or the REPL did not say: it is recorded as ended with its sandbox (an adoption kills it if it runs).
      await this.exited(proc, null)
      // Text the sandbox cannot pass to a program (a NUL byte, a lone surrogate): the request's mistake.
      if (err instanceof ReplRequestError && err.code === 'bad_request') throw new AppError('bad_request', err.message)
      if (live.state !== 'attached') throw moving('the session was restarted or moved while the process was starting; try again')
      this.deps.log.warn({ err, sessionId: live.id, processId: proc.id }, 'the sandbox did not start a process')
      throw new AppError('sandbox_failed', `the sandbox did not start the process${err instanceof ReplRequestError ? `: ${err.message}` : ''}`, { cause: err })
    }
    return rec
  }

  /** Writes `data` to the process's stdin (`eof`: then closes it). Throws process_exited, stdin_closed, stdin_full, sandbox_failed. */
  async stdin(live: LiveSession, pid: string, data: Buffer, eof: boolean): Promise<void> {
    if (this.procsOf(live).get(pid)?.ended) throw exited()
    await this.ask(live, 'proc_stdin', { proc_id: pid, data: data.toString('base64'), eof })
  }

  /** Sends `signal` to the process's group. Throws process_exited, sandbox_failed. */
  async signal(live: LiveSession, pid: string, signal: SignalT): Promise<void> {
    if (this.procsOf(live).get(pid)?.ended) throw exited()
    await this.ask(live, 'proc_signal', { proc_id: pid, signal })
  }

  /** Kills the process's group (answered once it is gone) and forgets the process: its record and output go. */
  async kill(live: LiveSession, pid: string): Promise<void> {
    const proc = this.procsOf(live).get(pid)
    await this.ask(live, 'proc_kill', { proc_id: pid }).catch((err: unknown) => {
      if (!(err instanceof AppError && err.code === 'process_exited')) throw err
    })
    // Its group is gone: its end is recorded first (killed, unless it had ended), so that a client
    // following its output gets its `exit` before the output goes.
    if (proc) await this.exited(proc, SIGKILL_EXIT_CODE)
    await this.deps.stores.processes.remove(live.tenant, live.id, pid)
  }

  /**
   * After an adoption: the processes Redis has as running are picked up where Redis has them. The
   * REPL replays each one's frames after the last one stored (a `limit` event `detached_output`
   * where its buffer no longer reaches back); those it does not know ended with an earlier sandbox.
   * Processes the REPL runs that Redis no longer has (deleted meanwhile) are killed.
   */
  async resume(live: LiveSession): Promise<void> {
    const { stores } = this.deps
    if ((await stores.processes.allIds(live.id)).length === 0) return
    const procs = this.procsOf(live)
    const running = await stores.processes.runningIds(live.id)
    // Frames that arrive from now on wait until what came before them is replayed.
    for (const id of running) procs.set(id, { id, live, pos: 0, early: [], loggedBytes: 0, droppedBytes: 0, ended: false, ending: null })
    await Promise.all(running.map(async (id) => (procs.get(id)!.pos = (await stores.logs.resumePoint(live.id, id)).pos)))
    const inRepl = new Map((await this.listed(live)).map((p) => [p.proc_id, p.running]))
    for (const id of running) {
      const proc = procs.get(id)!
      if (!inRepl.has(id)) {
        proc.early = null
        await this.exited(proc, null)
        continue
      }
      const reply = await live.client.request('proc_replay', { proc_id: id, after: proc.pos }, REQUEST_TIMEOUT_MS)
      const replayed = Array.isArray(reply.frames) ? (reply.frames as ProcessFrame[]).filter((f) => isProcessFrame(f) && f.proc_id === id) : []
      const early = proc.early ?? []
      proc.early = null
      for (const f of [...replayed, ...early]) this.handle(proc, f)
    }
    const known = new Set(running)
    for (const [id, isRunning] of inRepl) {
      if (known.has(id)) continue
      this.deps.log.info({ sessionId: live.id, processId: id, running: isRunning }, 'the sandbox has a process Redis does not: forgetting it')
      void live.client.request(isRunning ? 'proc_kill' : 'proc_forget', { proc_id: id }, REQUEST_TIMEOUT_MS).catch(() => undefined)
    }
    if (running.length) this.deps.log.info({ sessionId: live.id, processes: running.length }, 'processes resumed')
  }

  /**
   * The session's sandbox went (restarted, died, ended as hostile): every process Redis has as running
   * ends with exit_code null, once the ends already under way here are recorded.
   */
  async endRecorded(sid: string): Promise<void> {
    const { stores, feed } = this.deps
    await Promise.all([...(this.endings.get(sid) ?? [])])
    const ended = Date.now()
    const exit = { type: 'exit', exit_code: null }
    for (const pid of await stores.processes.runningIds(sid)) {
      const rec = await stores.processes.get(sid, pid)
      if (!rec) continue
      const added = await stores.processes.end({ tenant: rec.tenant, sid, pid }, exit, { exit_code: null, ended_at: ended }, [], '')
      feed.deliver(sid, pid, added)
    }
  }

  private procsOf(live: LiveSession): Map<string, LiveProcess> {
    const procs = this.sessions.get(live)
    if (!procs) throw moving()
    return procs
  }

  private async listed(live: LiveSession): Promise<Array<{ proc_id: string; running: boolean }>> {
    try {
      const reply = await live.client.request('proc_list', {}, REQUEST_TIMEOUT_MS)
      return Array.isArray(reply.processes)
        ? (reply.processes as Array<{ proc_id: string; running: boolean }>).filter((p) => typeof p.proc_id === 'string')
        : []
    } catch (err) {
      // An image from before background processes runs none.
      if (err instanceof ReplRequestError && err.code === 'unknown_type') return []
      throw err
    }
  }

  private onFrame(live: LiveSession, f: ProcessFrame): void {
    const proc = this.sessions.get(live)?.get(f.proc_id)
    if (!proc || proc.ended) return
    if (proc.early) {
      if (proc.early.length < EARLY_MAX_FRAMES) proc.early.push(f)
      return
    }
    this.handle(proc, f)
  }

  /** One frame of `proc`, in order: repeats (at or before its position) are dropped, a gap is reported. */
  private handle(proc: LiveProcess, f: ProcessFrame): void {
    if (proc.ended || f.pos <= proc.pos) return
    if (f.pos > proc.pos + 1) this.events.append(proc, { type: 'limit', what: 'detached_output' })
    proc.pos = f.pos
    if (f.type === 'proc_output') {
      this.events.output(proc, keepTextJson(f, { type: f.name === 'stderr' ? 'stderr' : 'stdout', text: typeof f.text === 'string' ? f.text : '', pos: f.pos }))
    } else if (f.type === 'proc_limit') {
      this.events.append(proc, { type: 'limit', what: 'output_bytes', pos: f.pos })
    } else {
      void this.exited(proc, countOf(f.exit_code) ?? null, countOf(f.dropped_bytes) ?? 0)
    }
  }

  /** Records the end of `proc`; once recorded, the REPL forgets it. */
  private async exited(proc: LiveProcess, exitCode: number | null, replDropped = 0): Promise<void> {
    const { live } = proc
    const ending = this.events.end(proc, exitCode, replDropped)
    let set = this.endings.get(live.id)
    if (!set) this.endings.set(live.id, (set = new Set()))
    set.add(ending)
    try {
      if (await ending) void live.client.request('proc_forget', { proc_id: proc.id }, REQUEST_TIMEOUT_MS).catch(() => undefined)
    } finally {
      set.delete(ending)
      if (set.size === 0 && this.endings.get(live.id) === set) this.endings.delete(live.id)
      const procs = this.sessions.get(live)
      if (procs?.get(proc.id) === proc) procs.delete(proc.id)
    }
  }

  /** A request about a process to the REPL, its refusals as the API's errors. */
  private async ask(live: LiveSession, type: string, fields: Record<string, unknown>): Promise<void> {
    try {
      await live.client.request(type, fields, REQUEST_TIMEOUT_MS)
    } catch (err) {
      if (!(err instanceof ReplRequestError)) {
        if (live.state !== 'attached') throw moving('the session was restarted or moved meanwhile; try again')
        throw new AppError('sandbox_failed', 'the sandbox did not answer about the process', { cause: err })
      }
      if (err.code === 'not_found' || err.code === 'exited') throw exited()
      if (err.code === 'stdin_closed') throw new AppError('stdin_closed', "the process's stdin was closed (eof=true); start another process to send more")
      if (err.code === 'stdin_full') throw new AppError('stdin_full', `${err.message}; try again once it has read them`, { headers: { 'retry-after': '1' } })
      throw new AppError('sandbox_failed', `the sandbox refused the request: ${err.message}`, { cause: err })
    }
  }
}

const exited = () => new AppError('process_exited', 'the process has exited')
const moving = (detail = 'the session is moving between API instances; try again in a moment') =>
  new AppError('session_moving', detail, { headers: { 'retry-after': '1' } })
