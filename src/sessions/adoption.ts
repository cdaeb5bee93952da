// Attaching this instance to sandboxes, and leases: a fresh sandbox, one adopted from Redis after
// a restart or from a dead instance (its running execution resumed, its queue re-run), lease
// renewal and take-over; a hibernated session is woken here (wake.ts) when something needs its
// sandbox. What happens when a sandbox's channel closes is in channel-end.ts.
import type { Logger } from 'pino'
import type { Config } from '../config.js'
import { AppError } from '../errors.js'
import type { SandboxDriver, SandboxHandle } from '../sandbox/driver.js'
import { ReplClient, SandboxMisbehaved } from '../repl/repl-client.js'
import type { SessionRecord } from '../store/records.js'
import type { Stores } from '../store/stores.js'
import { type DrivenLogs, type ExecutionRunner, type LiveSession, type LlmRequestHandler, type RecordedExecutions } from './runner/index.js'
import { endStranded, SessionOnOtherEngine, type Engines, type SandboxSource, type CheckpointStore } from './supply/index.js'
import type { ProcessRunner } from './processes/index.js'
import { channelClosed, sandboxMisbehaved } from './channel-end.js'
import type { SessionRegistry } from './registry.js'
import type { Metrics } from '../metrics.js'
import { wake } from './wake.js'
import { adoptRunning } from './adopt-running.js'

/** A session let go after a failed write is taken over again every this often until Redis answers (letGo), at most this many times. */
const ADOPT_AGAIN_MS = 500
const ADOPT_AGAIN_TRIES = 120

export interface AdoptionDeps {
  config: Config
  stores: Pick<Stores, 'sessions' | 'leases' | 'executions' | 'logs'>
  driver: SandboxDriver
  log: Logger
  registry: SessionRegistry
  runner: ExecutionRunner
  recorded: RecordedExecutions
  driven: DrivenLogs
  llmRequests?: LlmRequestHandler
  engines: Pick<Engines, 'whereIs' | 'local'>
  processes: Pick<ProcessRunner, 'attach' | 'resume' | 'endRecorded'>
  sandboxes: Pick<SandboxSource, 'restore'>
  checkpoints: Pick<CheckpointStore, 'remove'>
  metrics?: Metrics
}

export class Adoption {
  /** Attachments in progress (adoptions, restarts): later requests for the session wait for them. */
  private readonly pending = new Map<string, Promise<LiveSession>>()
  /** Set when the instance hands its sessions over (it is stopping): it adopts none any more. */
  private closing = false
  /** Sessions being created here, each with its create's end (see creating). */
  private readonly starting = new Map<string, Promise<LiveSession>>()
  /** Sessions being hibernated here: requests wait for the end, then find the session as it left it. */
  private readonly gates = new Map<string, Promise<unknown>>()
  /** Sessions being woken here (their lease is held before their sandbox is attached). */
  private readonly waking = new Set<string>()

  constructor(private readonly deps: AdoptionDeps) {}

  /** Wraps a started or adopted sandbox in a live session registered here, held under lease term `term`. */
  attach(rec: SessionRecord, handle: SandboxHandle, adopted: boolean, term: string): LiveSession {
    const { config, registry, runner, llmRequests } = this.deps
    const client = new ReplClient(handle.transport, this.deps.log.child({ sessionId: rec.id }), {
      readyTimeoutMs: config.SANDBOX_START_TIMEOUT_MS,
      expectReady: !adopted,
      inputBufferBytes: config.SANDBOX_INPUT_BUFFER_BYTES,
      maxViolations: config.SANDBOX_PROTOCOL_VIOLATIONS,
      outputBytesPerS: config.SANDBOX_OUTPUT_BYTES_PER_S,
    })
    const live: LiveSession = {
      id: rec.id,
      tenant: rec.tenant,
      containerId: handle.containerId,
      term,
      client,
      state: 'attached',
      idleTimeoutS: rec.idle_timeout_s,
      outputBytes: rec.limits.output_bytes ?? config.MAX_STREAM_BYTES,
      work: { queue: [], running: null, reserved: 0 },
    }
    registry.add(live)
    this.deps.processes.attach(live)
    if (llmRequests) {
      client.onLlmRequest((f) =>
        llmRequests.handle(
          {
            sessionId: rec.id,
            tenant: rec.tenant,
            running: () => runner.running(live),
            reply: (payload) => client.sendLlmResponse(String(f.id), payload),
          },
          f,
        ),
      )
    }
    client.onClose((why) => {
      const ends = { ...this.deps, markDead: (sid: string) => this.markDead(sid), reattach: (r: SessionRecord) => this.ensureLocal(r) }
      const handled = why instanceof SandboxMisbehaved ? sandboxMisbehaved(ends, rec, live, why) : channelClosed(ends, rec, live)
      handled.catch((err: unknown) => this.deps.log.error({ err, sessionId: rec.id }, 'handling a closed sandbox channel failed'))
    })
    // A backup for the attach stream's end: only a real exit closes the channel.
    void handle.exited.then((e) => {
      if (e.exitCode !== null && live.state === 'attached') live.client.close()
    })
    return live
  }

  /** The session when this instance is attached to it with its sandbox ready (no create or adoption under way); else undefined. */
  attached(sid: string): LiveSession | undefined {
    const live = this.starting.has(sid) || this.pending.has(sid) || this.gates.has(sid) ? undefined : this.deps.registry.get(sid)
    return live?.state === 'attached' ? live : undefined
  }

  /** This instance's attachment to the session: the existing one, one in progress, or a new adoption. Throws session_moving, session_dead, sandbox_failed. */
  ensureLocal(rec: SessionRecord): Promise<LiveSession> {
    const gate = this.gates.get(rec.id)
    if (gate) return gate.then(() => this.ensureLocal(rec))
    const creating = this.starting.get(rec.id)
    if (creating) return creating
    const existing = this.deps.registry.get(rec.id)
    if (existing) return Promise.resolve(existing)
    let p = this.pending.get(rec.id)
    if (!p) {
      if (this.closing) return Promise.reject(sessionMoving())
      p = this.adopt(rec).finally(() => this.pending.delete(rec.id))
      this.pending.set(rec.id, p)
    }
    return p
  }

  /**
   * A session SessionService.create is making here: held by this instance from before its record
   * exists (its lease and this instance's set are written first), so requests for it wait here for
   * the create (bounded by the sandbox's start timeouts) instead of adopting it half-made. Call the
   * returned function once: with the live session, or null when the create failed.
   */
  creating(id: string): (live: LiveSession | null) => void {
    let end!: (live: LiveSession | null) => void
    const made = new Promise<LiveSession>((resolve, reject) => {
      end = (live) => (live ? resolve(live) : reject(new AppError('session_not_found', `session ${id} could not be started`)))
    })
    made.catch(() => undefined) // a failed create nobody waited for
    this.starting.set(id, made)
    return (live) => {
      if (this.starting.get(id) === made) this.starting.delete(id)
      end(live)
    }
  }

  /** Whether the session is being created here (then it is held here already). */
  isCreating(id: string): boolean {
    return this.starting.has(id)
  }

  /** Runs `work` (a restart, a delete) while requests for the session wait for it instead of adopting the old sandbox. */
  async holding(id: string, work: Promise<LiveSession>): Promise<LiveSession> {
    this.pending.set(id, work)
    try {
      return await work
    } finally {
      if (this.pending.get(id) === work) this.pending.delete(id)
    }
  }

  /** Resolves once no hibernation of the session runs here (at once when none does). */
  async settled(id: string): Promise<void> {
    await this.gates.get(id)
  }

  /**
   * Runs `work` (a hibernation: the sandbox is let go and checkpointed) while requests for the
   * session wait for its end; then they attach to it as Redis then has it (woken, if hibernated).
   */
  async gated<T>(id: string, work: () => Promise<T>): Promise<T> {
    const done = work()
    const gate = done.then(
      () => undefined,
      () => undefined,
    )
    this.gates.set(id, gate)
    try {
      return await done
    } finally {
      if (this.gates.get(id) === gate) this.gates.delete(id)
    }
  }

  /**
   * Takes the session's lease and returns its term, or throws session_moving: another instance holds
   * it (a request that reaches this code was meant for the holder, and the lease moved meanwhile;
   * src/cluster/ routes).
   */
  async claimLease(rec: SessionRecord): Promise<string> {
    const { stores, config } = this.deps
    const lease = await stores.leases.acquireLease(rec.id, config.instanceId, config.LEASE_TTL_MS)
    if (lease.holder !== config.instanceId) throw sessionMoving()
    return lease.term
  }

  /**
   * Makes this instance the session's holder unless another live instance holds it: its lease is
   * free, ours, or `from`'s while `from`'s heartbeat is gone (an instance that stopped beating or
   * handed its sessions over, and has not come back; of several instances trying, exactly one takes
   * the lease). 'attached': held here now (a running execution resumed); 'elsewhere': another
   * instance holds it; 'unavailable': nothing to attach to here (no such session, dead, still
   * starting, or the adoption failed: the caller's own handling gives the error).
   */
  async takeOver(sid: string, from: string | null): Promise<'attached' | 'elsewhere' | 'unavailable'> {
    const { stores, config, registry, log } = this.deps
    const forget = async () => {
      if (from && from !== config.instanceId) await stores.leases.removeInstanceSession(from, sid)
    }
    if (registry.has(sid) || this.starting.has(sid)) {
      await forget()
      return 'attached'
    }
    const rec = await stores.sessions.getSession(sid)
    if (!rec || rec.status === 'dead') await forget()
    if (!rec || rec.status === 'dead' || rec.status === 'starting' || this.closing) return 'unavailable'
    // Only an instance on the session's engine can attach to its sandbox: while one lives, it is theirs.
    const where = await this.deps.engines.whereIs(rec)
    if (!where.here && where.instances.length) return 'elsewhere'
    if ((await stores.leases.takeLease(sid, config.instanceId, from, config.LEASE_TTL_MS)).holder !== config.instanceId) return 'elsewhere'
    // Held here now, a hibernated session is woken by the request's own handling, only if it needs
    // the sandbox (a hibernate or a delete does not); requests at other instances come here meanwhile.
    if (rec.status === 'hibernated') return 'attached'
    try {
      await this.ensureLocal(rec)
    } catch (err) {
      if (err instanceof AppError && (err.code === 'session_dead' || err.code === 'session_not_found')) await forget()
      else log.warn({ err, sessionId: sid, from }, 'could not take the session over')
      return 'unavailable'
    }
    await forget()
    if (from) log.info({ sessionId: sid, from }, 'took the session over from an instance that is gone')
    return 'attached'
  }

  /** The instance is stopping: no adoption starts from now on. */
  close(): void {
    this.closing = true
  }

  /**
   * Keeps this instance's leases, each under the term it attached with; a session whose lease passed
   * to another holder meanwhile (this instance was paused, or looked gone) is let go (not stopped).
   */
  async renewLeases(): Promise<void> {
    const { stores, config, registry } = this.deps
    const leases = registry.ids().map((sid) => ({ sid, term: registry.get(sid)?.term ?? '' }))
    // Sessions being created are held too, whatever the term: a slow start must not let their lease lapse.
    for (const sid of this.starting.keys()) if (!registry.has(sid)) leases.push({ sid, term: '' })
    // So are those being hibernated or woken: a large sandbox's checkpoint or restore takes longer than a lease.
    for (const sid of [...this.gates.keys(), ...this.waking]) if (!registry.has(sid)) leases.push({ sid, term: '' })
    const holders = await stores.leases.renewLeases(leases, config.instanceId, config.LEASE_TTL_MS)
    for (const [sid, holder] of holders) {
      const live = registry.get(sid)
      if (live && holder !== config.instanceId) await this.letGo(live, 'lost')
    }
  }

  /** After a restart of this instance: attaches again to the sessions it held. */
  async readoptAll(): Promise<void> {
    const { stores, config } = this.deps
    for (const sid of await stores.leases.instanceSessionIds(config.instanceId)) {
      const rec = await stores.sessions.getSession(sid)
      if (!rec) {
        await stores.leases.removeInstanceSession(config.instanceId, sid)
        continue
      }
      if (rec.status === 'dead') continue
      await this.ensureLocal(rec).catch((err: unknown) => this.deps.log.warn({ err, sessionId: sid }, 'could not re-adopt session'))
    }
  }

  /**
   * The runner cannot go on with the session (see RunnerDeps.letGo): this instance lets go of it.
   * Unrecorded: it is adopted again here as soon as Redis answers (or by the next request, or by the
   * reaper), which reads what was not recorded back from the container. Lost: its lease passed to another
   * holder (Redis refused a write, or the renewal found it), which relays the sandbox from now on;
   * when that one let it go again meanwhile, it is adopted here afresh, from what Redis holds.
   * Unkillable: it is marked dead and due now, so the reaper removes its sandbox as soon as the
   * engine answers.
   */
  async letGo(live: LiveSession, why: 'unrecorded' | 'unkillable' | 'lost'): Promise<void> {
    if (why === 'lost') return this.lost(live)
    this.deps.registry.release(live)
    if (why === 'unrecorded') return this.adoptAgain(live.id)
    try {
      await this.markDead(live.id)
      await this.deps.stores.sessions.setDeadline(live.id, Date.now())
    } catch (err) {
      this.deps.log.error({ err, sessionId: live.id }, 'could not mark a sandbox that could not be killed for removal')
    }
  }

  /** Takes a session let go after a failed write over again, once Redis answers: its readers wait for the rest meanwhile. */
  private async adoptAgain(sid: string): Promise<void> {
    for (let tries = 0; tries < ADOPT_AGAIN_TRIES && !this.closing; tries++) {
      await new Promise((resolve) => setTimeout(resolve, ADOPT_AGAIN_MS).unref())
      if ((await this.takeOver(sid, null).catch(() => 'unavailable')) !== 'unavailable') return
    }
  }

  private async lost(live: LiveSession): Promise<void> {
    if (live.state === 'released') return
    this.deps.log.warn({ sessionId: live.id, term: live.term }, 'the session lease passed to another holder; letting the session go')
    this.deps.registry.release(live)
    const got = await this.takeOver(live.id, null).catch((err: unknown) => {
      this.deps.log.warn({ err, sessionId: live.id }, 'could not adopt again a session whose lease lapsed')
      return 'unavailable'
    })
    if (got === 'attached') this.deps.log.info({ sessionId: live.id }, 'adopted again a session nobody held')
  }

  /** The session's sandbox is gone for good, and its background processes with it; `detail` says why when there is more to say. */
  async markDead(sid: string, detail?: string): Promise<void> {
    await this.deps.stores.sessions.updateSession(sid, { status: 'dead', ...(detail ? { status_detail: detail } : {}) })
    await this.deps.stores.leases.removeInstanceSession(this.deps.config.instanceId, sid)
    await this.deps.processes.endRecorded(sid)
  }

  private async adopt(seen: SessionRecord): Promise<LiveSession> {
    const { stores, config } = this.deps
    // Read again: the session may have been hibernated (or woken, or deleted) since the caller read it.
    const rec = await stores.sessions.getSession(seen.id)
    if (!rec || rec.tenant !== seen.tenant) throw new AppError('session_not_found', `no session ${seen.id}`)
    if (rec.status === 'dead') throw new AppError('session_dead', rec.status_detail || "the session's sandbox has died; restart it or create a new session")
    // Only an instance on the session's Docker engine can reach its sandbox.
    const where = await this.deps.engines.whereIs(rec)
    if (!where.here && where.instances.length) throw new SessionOnOtherEngine(where.engine, where.instances)
    const term = await this.claimLease(rec)
    // A hibernated session is not bound to its engine: with none of its engine's instances left, it
    // wakes here from its checkpoint (CHECKPOINT_DIR shared between the hosts; verified as anywhere).
    if (rec.status === 'hibernated') {
      const here = { engine: this.deps.engines.local(), attach: (r: SessionRecord, h: SandboxHandle, t: string) => this.attach(r, h, true, t) }
      this.waking.add(rec.id)
      try {
        return await wake({ ...this.deps, ...here, markDead: (sid, why) => this.markDead(sid, why) }, rec, term)
      } finally {
        this.waking.delete(rec.id)
      }
    }
    if (!where.here) return endStranded({ ...this.deps, instanceId: config.instanceId }, rec)
    return adoptRunning({ ...this.deps, markDead: (sid, why) => this.markDead(sid, why), attach: (r, h, t) => this.attach(r, h, true, t) }, rec, term)
  }
}

/** 503 with Retry-After: the session's holder is changing (or this instance is stopping). */
function sessionMoving(): AppError {
  return new AppError('session_moving', 'the session is moving between API instances; try again in a moment', { headers: { 'retry-after': '1' } })
}
