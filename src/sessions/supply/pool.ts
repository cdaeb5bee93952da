// The warm pool: each API instance keeps SANDBOX_POOL_SIZE started sandboxes whose REPL said ready,
// for the default template, runtime and limits, so a session that asks for exactly those starts
// without waiting for Docker. A pooled sandbox has no tenant until it is taken, is handed out once,
// and serves that one session only (it is removed with it). Refills are bounded: a few at a time,
// backing off after failures (refill-backoff.ts).
import { randomBytes } from 'node:crypto'
import type { Logger } from 'pino'
import type { Config } from '../../config.js'
import { ReplClient } from '../../repl/repl-client.js'
import type { LimitsT } from '../../schemas.js'
import { containerName } from '../../sandbox/container-spec.js'
import type { SandboxDriver, SandboxHandle } from '../../sandbox/driver.js'
import type { PoolStore } from '../../store/pool-store.js'
import { DEFAULT_TEMPLATE } from '../../templates.js'
import type { CapacityPlace, HostCapacity } from './host-capacity.js'
import type { Metrics } from '../../metrics.js'
import { resolveSessionLimits, sandboxSpec } from './session-limits.js'
import type { TemplateImages } from './template-images.js'
import { RefillBackoff } from './refill-backoff.js'

/** Sandboxes made at once: a burst of takes refills at a pace the engine (and two cores) can bear. */
const MAX_CONCURRENT_CREATES = 2
/** How long a pooled sandbox may take to answer the liveness probe when it is taken. */
const PROBE_TIMEOUT_MS = 1000
/**
 * How long refills wait for the requests that hold the pool (see hold()) at most: a pooled create or
 * a one-shot is answered well within it, and a long one-shot must not leave the pool empty.
 */
const HOLD_MAX_MS = 250

/** A sandbox handed out by the pool: started, its REPL ready, with no state of anyone. */
export interface PooledSandbox {
  /** Its pool id; the container is named containerName(id). */
  readonly id: string
  readonly handle: SandboxHandle
}

/** A sandbox just taken: `alive` says whether it may be used (false: it was dead, and is removed). */
export interface TakenSandbox extends PooledSandbox {
  readonly alive: Promise<boolean>
}

interface Entry extends PooledSandbox {
  /** The pool's own client on the channel: it sees `ready`, the probe's reply, and the channel closing. */
  readonly client: ReplClient
  state: 'starting' | 'ready' | 'checking' | 'taken' | 'gone'
  /** False once its channel closed or its container stopped. */
  alive: boolean
}

export interface PoolDeps {
  config: Config
  driver: SandboxDriver
  log: Logger
  metrics: Metrics
  capacity: HostCapacity
  templates: TemplateImages
  poolStore: PoolStore
}

export class WarmPool {
  readonly size: number
  /** What a pooled sandbox is made with: the default runtime and the default limits (no tenant's own). */
  private readonly runtime: Config['SANDBOX_RUNTIME']
  private readonly limits: LimitsT
  private readonly ready: Entry[] = []
  /** Every sandbox of the pool until it is bound or removed, by pool id. */
  private readonly entries = new Map<string, Entry>()
  /** Sandboxes being made, by pool id (null until the container exists). */
  private readonly starting = new Map<string, Entry | null>()
  private readonly inflight = new Set<Promise<void>>()
  /** Names of pool containers this instance made and may still hold unbound (the sweep leaves them alone). */
  private readonly names = new Set<string>()
  /** Taken sandboxes still under their pool names: container id → the session they serve (see bind()). */
  private readonly unnamed = new Map<string, string>()
  private readonly backoff: RefillBackoff
  /** Requests under way that took (or are about to take) a pooled sandbox, and since when refills wait for them. */
  private holds = 0
  private heldSince = 0
  private retryTimer: NodeJS.Timeout | null = null
  private closed = false

  constructor(private readonly deps: PoolDeps) {
    const c = deps.config
    this.size = c.SANDBOX_POOL_SIZE
    this.runtime = c.SANDBOX_RUNTIME
    // '*' resolves to the limits every tenant gets unless its own override lowers them.
    this.limits = resolveSessionLimits(c, '*', {}).limits
    this.backoff = new RefillBackoff(deps.log)
  }

  /** Whether a session of this shape can take a pooled sandbox. */
  matches(template: string, runtime: string, limits: LimitsT, env: Record<string, string>): boolean {
    const l = this.limits
    return (
      this.size > 0 &&
      template === DEFAULT_TEMPLATE &&
      runtime === this.runtime &&
      Object.keys(env).length === 0 &&
      limits.memory_mb === l.memory_mb &&
      limits.cpus === l.cpus &&
      limits.pids === l.pids &&
      limits.workspace_mb === l.workspace_mb &&
      limits.output_bytes === l.output_bytes
    )
  }

  /** Whether this instance made the pool container `name` and has not let go of it. */
  owns(name: string): boolean {
    return this.names.has(name)
  }

  /** The binding of a taken sandbox is in Redis now (or it went with a failed session): the pool lets go of it. */
  settled(id: string): void {
    this.entries.delete(id)
    this.names.delete(containerName(id))
  }

  /**
   * The next ready sandbox, or null when none is (the caller makes one cold). Each is handed out
   * once: it leaves the pool synchronously. Whether it still lives (its channel open, its container
   * running, its REPL answering a probe) is known when `alive` resolves, so the caller can do other
   * work meanwhile; one found dead is removed here, and the caller takes the next.
   */
  take(): TakenSandbox | null {
    const e = this.ready.shift()
    if (!e) {
      if (this.size > 0) this.deps.metrics.poolTakes.inc({ result: 'miss' })
      return null
    }
    e.state = 'checking'
    this.gauge()
    this.refill()
    const alive = this.probe(e).then((ok) => {
      if (ok) {
        e.state = 'taken'
        this.deps.metrics.poolTakes.inc({ result: 'hit' })
        return true
      }
      this.deps.log.warn({ poolId: e.id, containerId: e.handle.containerId }, 'a pooled sandbox died while waiting; not handed out')
      this.deps.metrics.poolTakes.inc({ result: 'discarded' })
      void this.discard(e)
      return false
    })
    return { id: e.id, handle: e.handle, alive }
  }

  /**
   * Defers refills while the caller's request is under way (until the returned function is called,
   * at most HOLD_MAX_MS after the first refill it deferred): making a sandbox is Docker's heaviest
   * work, and it must not compete with the request that took one (on a small host, for its CPU).
   */
  hold(): () => void {
    this.holds++
    let held = true
    return () => {
      if (!held) return
      held = false
      this.holds--
      // After the caller's reply is written (it is sent in this turn of the event loop).
      setImmediate(() => this.refill())
    }
  }

  /** A taken sandbox that served no one (its session was refused before it started) goes back, if it lives. */
  giveBack(taken: TakenSandbox): void {
    const e = this.entries.get(taken.id)
    void taken.alive.then((ok) => {
      if (!ok || !e || e.state !== 'taken') return
      if (this.closed || !e.alive) {
        void this.discard(e)
        return
      }
      e.state = 'ready'
      this.ready.unshift(e)
      this.gauge()
    })
  }

  /**
   * Records in Redis that `sessionId` took the sandbox (its labels say no session); the sweep goes by
   * that binding from here on. Then it is renamed after the session as a cold one is named (docs/operations.md),
   * with the refill: after the reply, as it is a Docker call.
   */
  async bind(sb: PooledSandbox, sessionId: string): Promise<void> {
    await this.deps.poolStore.bind(sb.handle.containerId, sessionId)
    this.unnamed.set(sb.handle.containerId, sessionId)
  }

  /** Starts filling the pool (after the start-up sweep) and says this instance keeps one. */
  async start(): Promise<void> {
    if (this.size === 0) return
    await this.heartbeat()
    this.refill()
  }

  /** Renews this instance's heartbeat, so other instances' sweeps leave its pool alone. */
  async heartbeat(): Promise<void> {
    if (this.size > 0 && !this.closed) await this.deps.poolStore.heartbeat(this.deps.config.instanceId, this.deps.config.LEASE_TTL_MS)
  }

  /** Removes every sandbox still in the pool, and stops the ones being made (shutdown). */
  async close(): Promise<void> {
    this.closed = true
    if (this.retryTimer) clearTimeout(this.retryTimer)
    // A sandbox being made stops waiting for `ready` and removes itself; its creation is awaited.
    for (const e of this.starting.values()) e?.client.close()
    // Taken sandboxes stay with their sessions (re-adopted later): those not yet renamed are renamed now.
    await Promise.all([...this.ready.splice(0).map((e) => this.discard(e)), this.nameTaken(), ...this.inflight])
    this.gauge()
    if (this.size > 0) await this.deps.poolStore.endHeartbeat(this.deps.config.instanceId).catch(() => undefined)
  }

  /** Makes sandboxes until the pool is full, a few at a time, unless it is backing off. */
  private refill(): void {
    if (this.closed || this.size === 0) return
    const now = Date.now()
    if (this.holds > 0 && this.ready.length + this.starting.size < this.size) this.heldSince ||= now
    const held = this.holds > 0 && this.heldSince > 0 ? this.heldSince + HOLD_MAX_MS - now : 0
    // Renames are Docker calls too: they wait for the same requests as a create, but not for a backoff.
    if (this.holds === 0 || (this.heldSince > 0 && held <= 0)) void this.nameTaken()
    const wait = Math.max(this.backoff.waitMs(now), held)
    if (wait > 0) {
      this.retryTimer ??= setTimeout(() => {
        this.retryTimer = null
        this.refill()
      }, wait).unref()
      return
    }
    this.heldSince = 0
    while (this.ready.length + this.starting.size < this.size && this.starting.size < MAX_CONCURRENT_CREATES) {
      const p = this.createOne().finally(() => this.inflight.delete(p))
      this.inflight.add(p)
    }
  }

  private async createOne(): Promise<void> {
    const { config: c, driver, capacity, templates, log } = this.deps
    const id = `pool-${randomBytes(8).toString('hex')}`
    const name = containerName(id)
    this.starting.set(id, null)
    this.names.add(name)
    this.gauge()
    let place: CapacityPlace | null = null
    let entry: Entry | null = null
    try {
      const image = await templates.check(DEFAULT_TEMPLATE)
      // Pooled sandboxes count in the host's memory like any other: a full host refuses them too.
      place = await capacity.reserve(id, this.limits.memory_mb)
      const handle = await driver.create({
        ...sandboxSpec(c, { sessionId: id, tenant: '', runtime: this.runtime, limits: this.limits, env: {} }),
        image,
        pooled: true,
      })
      const e: Entry = {
        id,
        handle,
        client: new ReplClient(handle.transport, log.child({ poolId: id }), { readyTimeoutMs: c.SANDBOX_START_TIMEOUT_MS }),
        state: 'starting',
        alive: true,
      }
      entry = e
      this.entries.set(id, e)
      this.starting.set(id, e)
      const gone = () => this.died(e)
      e.client.onClose(gone)
      void handle.exited.then(gone)
      await place.confirm()
      await e.client.ready.catch((err: unknown) => {
        throw templates.notReady(DEFAULT_TEMPLATE, err)
      })
      if (this.closed || !e.alive) throw new Error(this.closed ? 'the pool closed' : 'the sandbox died as it started')
      e.state = 'ready'
      this.ready.push(e)
      this.backoff.succeeded()
    } catch (err) {
      if (entry) await this.discard(entry)
      else this.names.delete(name)
      if (!this.closed) this.failed(err)
    } finally {
      place?.release()
      this.starting.delete(id)
      this.gauge()
      this.refill()
    }
  }

  /** A pooled sandbox's channel closed or its container stopped: one that was waiting is removed. */
  private died(e: Entry): void {
    e.alive = false
    if (e.state !== 'ready') return
    const i = this.ready.indexOf(e)
    if (i >= 0) this.ready.splice(i, 1)
    this.deps.log.warn({ poolId: e.id, containerId: e.handle.containerId }, 'a pooled sandbox died while waiting')
    void this.discard(e)
    if (!this.closed) this.failed(new Error('a pooled sandbox died while waiting'))
    this.gauge()
    this.refill()
  }

  /** Counts a failure (refill-backoff.ts says how long refills then wait). */
  private failed(err: unknown): void {
    this.deps.metrics.poolCreateFailures.inc()
    this.backoff.failed(err)
  }

  /** Renames the taken sandboxes still under their pool names (see bind()); one that fails keeps its pool name, logged. */
  private nameTaken(): Promise<void> {
    if (this.unnamed.size === 0) return Promise.resolve()
    const renames = [...this.unnamed].map(([containerId, sessionId]) =>
      this.deps.driver
        .nameAfterSession(containerId, sessionId)
        .catch((err: unknown) => this.deps.log.warn({ err, containerId, sessionId }, 'could not name a taken pooled sandbox after its session')),
    )
    this.unnamed.clear()
    // Awaited by close() like a create.
    const done: Promise<void> = Promise.all(renames).then(() => void this.inflight.delete(done))
    this.inflight.add(done)
    return done
  }

  /** Answers whether the sandbox still lives: its channel open and its REPL answering. */
  private async probe(e: Entry): Promise<boolean> {
    if (!e.alive) return false
    try {
      // Answered by the REPL's stdin reader at once (a hung REPL process, or one stopped, never answers).
      await e.client.request('ping', {}, PROBE_TIMEOUT_MS)
    } catch {
      return false
    }
    return e.alive
  }

  private async discard(e: Entry): Promise<void> {
    e.state = 'gone'
    this.entries.delete(e.id)
    e.client.close()
    await this.deps.driver
      .remove(e.handle.containerId)
      .catch((err: unknown) => this.deps.log.warn({ err, poolId: e.id }, 'could not remove a pooled sandbox; the sweep will'))
    this.names.delete(containerName(e.id))
  }

  private gauge(): void {
    this.deps.metrics.poolSandboxes.set({ state: 'ready' }, this.ready.length)
    this.deps.metrics.poolSandboxes.set({ state: 'starting' }, this.starting.size)
  }
}
