// Where a session's sandbox comes from: the warm pool when a new session asks for exactly what the
// pool holds (already started, already counted in the host's memory), else a new container of its
// template, under a place in the host's memory (host-capacity.ts); or, for a hibernated session,
// its checkpoint restored into a new container (checkpoint-store.ts verifies it first).
import type { Config } from '../../config.js'
import { ReplClosedError, ReplTimeoutError } from '../../repl/repl-client.js'
import type { SandboxSpec } from '../../sandbox/container-spec.js'
import type { RestoredSandbox, SandboxDriver, SandboxHandle } from '../../sandbox/driver.js'
import type { SessionRecord } from '../../store/records.js'
import { DEFAULT_TEMPLATE } from '../../templates.js'
import type { CheckpointStore } from './checkpoint-store.js'
import type { CapacityPlace, HostCapacity } from './host-capacity.js'
import type { TakenSandbox, WarmPool } from './pool.js'
import { sandboxSpec } from './session-limits.js'
import type { TemplateImages } from './template-images.js'

/** A session's claim on a sandbox, from before its record is written until it is attached. */
export interface SandboxTicket {
  /** The sandbox came from the pool: its REPL already said ready. Known once start() resolved. */
  readonly pooled: boolean
  /** Hands over a live pooled sandbox, or creates one. Throws the engine's errors, capacity. */
  start(): Promise<SandboxHandle>
  /** Records in Redis that the session took the pooled sandbox start() handed over (cold: nothing); sent with the session's other writes. */
  bind(): Promise<void>
  /** Cold: counts the engine's memory again now that the sandbox exists (throws capacity). Pooled: nothing. */
  confirm(): Promise<void>
  /** Waits for the REPL's `ready`; one that never comes is the template's fault (template_unusable). */
  ready(ready: Promise<unknown>): Promise<void>
  /** Gives up what was not used (a capacity place, or a pooled sandbox the session never started with); the pool may refill. Safe to call twice. */
  release(): void
}

export interface SandboxSourceDeps {
  config: Config
  driver: SandboxDriver
  capacity: HostCapacity
  templates: TemplateImages
  pool: WarmPool
  checkpoints: CheckpointStore
}

export class SandboxSource {
  constructor(private readonly deps: SandboxSourceDeps) {}

  /** Throws unknown_template, template_unusable, capacity, sandbox_failed. */
  async reserve(rec: SessionRecord): Promise<SandboxTicket> {
    const { templates, pool } = this.deps
    const template = rec.template ?? DEFAULT_TEMPLATE
    await templates.check(template)
    if (pool.matches(template, rec.runtime, rec.limits, rec.env)) {
      // The refill this take starts waits until the session is created (release).
      const unhold = pool.hold()
      const taken = pool.take()
      if (taken) return this.pooled(rec, taken, unhold)
      unhold()
    }
    const place = await this.deps.capacity.reserve(rec.id, rec.limits.memory_mb)
    return {
      pooled: false,
      start: () => this.create(rec),
      bind: async () => undefined,
      confirm: () => place.confirm(),
      ready: (ready) => this.readyOrUnusable(template, ready),
      release: () => place.release(),
    }
  }

  /**
   * A ticket for a pooled sandbox whose liveness probe is still under way (it overlaps the session's
   * first Redis writes). At start: the first live one of it and the pool's next ones, else a cold one.
   */
  private pooled(rec: SessionRecord, first: TakenSandbox, unhold: () => void): SandboxTicket {
    const { pool, capacity } = this.deps
    let used: TakenSandbox | null = null
    let cold: CapacityPlace | null = null
    let started = false
    let released = false
    return {
      get pooled() {
        return cold === null
      },
      start: async () => {
        started = true
        for (let t: TakenSandbox | null = first; t; t = pool.take()) {
          if (!(await t.alive)) continue
          used = t
          return t.handle
        }
        // Every pooled sandbox on offer was dead: this one is made cold after all.
        cold = await capacity.reserve(rec.id, rec.limits.memory_mb)
        return this.create(rec)
      },
      bind: async () => {
        if (used) await pool.bind(used, rec.id)
      },
      confirm: async () => cold?.confirm(),
      ready: (ready) => this.readyOrUnusable(DEFAULT_TEMPLATE, ready),
      release: () => {
        if (released) return
        released = true
        unhold()
        cold?.release()
        if (!started) pool.giveBack(first)
        // Bound to its session (or removed with a session that failed): the pool lets go of it.
        else if (used) pool.settled(used.id)
      },
    }
  }

  /**
   * The hibernated session's sandbox, started from its checkpoint once the checkpoint matches
   * `rec.checkpoint_digest`, in a new container made as the first one was. Its REPL sends no
   * `ready` (it is the one that was running). Throws CheckpointMismatch, capacity, CheckpointError,
   * the engine's errors.
   */
  async restore(rec: SessionRecord): Promise<RestoredSandbox> {
    const { checkpoints, capacity, driver } = this.deps
    await checkpoints.verify(rec.id, rec.checkpoint_digest ?? '')
    const place = await capacity.reserve(rec.id, rec.limits.memory_mb)
    try {
      const handle = await driver.restore(this.spec(rec), checkpoints.dir(rec.id))
      await place.confirm().catch(async (err: unknown) => {
        await driver.remove(handle.containerId)
        throw err
      })
      return handle
    } finally {
      place.release()
    }
  }

  private create(rec: SessionRecord): Promise<SandboxHandle> {
    return this.deps.driver.create(this.spec(rec))
  }

  private spec(rec: SessionRecord): SandboxSpec {
    const image = this.deps.templates.image(rec.template ?? DEFAULT_TEMPLATE)
    return { ...sandboxSpec(this.deps.config, { sessionId: rec.id, tenant: rec.tenant, runtime: rec.runtime, limits: rec.limits, env: rec.env }), image }
  }

  private async readyOrUnusable(template: string, ready: Promise<unknown>): Promise<void> {
    try {
      await ready
    } catch (err) {
      if (err instanceof ReplClosedError || err instanceof ReplTimeoutError) throw this.deps.templates.notReady(template, err)
      throw err
    }
  }
}
