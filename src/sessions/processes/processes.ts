// The way in to a session's background processes, for the HTTP routes and the MCP tools: start
// one, list and read them, follow one's output (from Redis, on any instance), write its stdin,
// signal it, kill and forget it (on the instance holding the session, through ProcessRunner).
import { AppError } from '../../errors.js'
import type { ProcessT, SignalT, StartProcessBodyT } from '../../schemas.js'
import type { EventFeed } from '../../store/event-feed.js'
import type { LoggedEvent, ProcessRecord, SessionRecord } from '../../store/records.js'
import type { Stores } from '../../store/stores.js'
import { newId } from '../ids.js'
import type { LiveSession } from '../runner/index.js'
import type { ProcessRunner } from './process-runner.js'

export interface ProcessesDeps {
  stores: Pick<Stores, 'processes' | 'logs'>
  feed: Pick<EventFeed, 'followLog'>
  runner: ProcessRunner
  /** The session's record when it is the tenant's; else throws session_not_found. */
  session: (tenant: string, sid: string) => Promise<SessionRecord>
  /** The session attached here (adopted when its lease is free), alive; throws session_dead, session_moving, sandbox_failed. */
  usable: (rec: SessionRecord) => Promise<LiveSession>
  /** Whether this instance holds the session (then it appends its processes' output itself). */
  holds: (sid: string) => boolean
}

const iso = (ms: number) => new Date(ms).toISOString()

function toProcess(r: ProcessRecord): ProcessT {
  return {
    id: r.id,
    session_id: r.session_id,
    command: r.command,
    cwd: r.cwd ?? '',
    status: r.status === 'exited' ? 'exited' : 'running',
    exit_code: r.exit_code ?? null,
    started_at: iso(r.started_at),
    ended_at: r.ended_at ? iso(r.ended_at) : null,
  }
}

export class Processes {
  constructor(private readonly deps: ProcessesDeps) {}

  /** Starts `bash -c command` in the session's sandbox. Throws as ProcessRunner.start, and session_not_found. */
  async start(tenant: string, sid: string, body: StartProcessBodyT): Promise<ProcessT> {
    const live = await this.deps.usable(await this.deps.session(tenant, sid))
    return toProcess(await this.deps.runner.start(live, { id: newId('prc'), command: body.command, cwd: body.cwd, env: body.env }))
  }

  /** The session's processes, oldest first. */
  async list(tenant: string, sid: string): Promise<ProcessT[]> {
    const [, recs] = await Promise.all([this.deps.session(tenant, sid), this.deps.stores.processes.list(sid)])
    return recs.filter((r) => r.tenant === tenant).map(toProcess)
  }

  async get(tenant: string, sid: string, pid: string): Promise<ProcessT> {
    return toProcess(await this.record(tenant, sid, pid))
  }

  /** The process's record; 404 when the session or the process is missing, or another tenant's. */
  async record(tenant: string, sid: string, pid: string): Promise<ProcessRecord> {
    // Both in one round trip; the session's check comes first.
    const [, rec] = await Promise.all([this.deps.session(tenant, sid), this.deps.stores.processes.get(sid, pid)])
    if (!rec || rec.tenant !== tenant) throw new AppError('process_not_found', `no process ${pid} in session ${sid}`)
    return rec
  }

  /** Streams the process's output events after `afterId` until its `exit` (see EventFeed.follow). */
  follow(sid: string, pid: string, afterId: string, onEvent: (e: LoggedEvent) => Promise<void> | void, signal: AbortSignal): Promise<boolean> {
    return this.deps.feed.followLog(sid, pid, afterId, onEvent, signal, {
      local: this.deps.holds(sid),
      isLive: async () => (await this.deps.stores.processes.get(sid, pid))?.status === 'running',
      endType: 'exit',
    })
  }

  /** How many events follow `afterId` in the process's output (0 when it is the last). */
  async eventsAfter(sid: string, pid: string, afterId: string): Promise<number> {
    return (await this.deps.stores.logs.readEvents(sid, pid, afterId, 1)).length
  }

  /** Writes to its stdin (`eof`: then closes it). Throws process_not_found, process_exited, stdin_closed, stdin_full. */
  async stdin(tenant: string, sid: string, pid: string, data: Buffer, eof: boolean): Promise<void> {
    const live = await this.running(tenant, sid, pid)
    await this.deps.runner.stdin(live, pid, data, eof)
  }

  /** Sends a signal to its process group. Throws process_not_found, process_exited. */
  async signal(tenant: string, sid: string, pid: string, signal: SignalT): Promise<void> {
    const live = await this.running(tenant, sid, pid)
    await this.deps.runner.signal(live, pid, signal)
  }

  /** Kills it (its whole process group) and forgets it: its record and output are gone. Throws process_not_found. */
  async delete(tenant: string, sid: string, pid: string): Promise<void> {
    const rec = await this.deps.session(tenant, sid)
    const [live] = await Promise.all([this.deps.usable(rec), this.record(tenant, sid, pid)])
    await this.deps.runner.kill(live, pid)
  }

  /** The session attached here, for a process of the tenant's that has not exited. */
  private async running(tenant: string, sid: string, pid: string): Promise<LiveSession> {
    const rec = await this.deps.session(tenant, sid)
    const [live, proc] = await Promise.all([this.deps.usable(rec), this.record(tenant, sid, pid)])
    if (proc.status === 'exited') throw new AppError('process_exited', `process ${pid} has exited (exit code ${proc.exit_code ?? 'none'})`)
    return live
  }
}
