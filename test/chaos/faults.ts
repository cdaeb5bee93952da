// The chaos soak's faults, one at a time in a seeded order (each round every kind once, shuffled),
// each on a seeded target. A fault strikes at once; the service's recovery from it (an instance
// restarted, Redis back) runs in the background, and `settle()` waits for all of it.
import Docker from 'dockerode'
import { LABEL } from '../../src/sandbox/labels.js'
import type { Rng } from '../fuzz/random.js'
import type { Cluster, Instance } from './cluster.js'
import type { ChaosSession } from './execution-check.js'
import type { Tally } from './tally.js'

export const FAULT_KINDS = ['instance-kill', 'instance-term', 'redis-kill', 'sandbox-kill', 'instance-stop', 'redis-pause', 'pid1-kill'] as const
export type FaultKind = (typeof FAULT_KINDS)[number]

/**
 * A SIGKILLed instance is started again (same id and port) at most this long after: a seeded time
 * from a third of it, so that its return falls before, during or after a survivor's take-over of its
 * sessions (its heartbeat lapses after three beats, 3 s by default).
 */
const INSTANCE_DOWN_MS = 3000
/** A SIGSTOPped instance gets SIGCONT this long after. */
const INSTANCE_FROZEN_MS = 5000
/** A SIGKILLed Redis is started again from its files this long after. */
const REDIS_DOWN_MS = 1000
/** A SIGSTOPped Redis gets SIGCONT this long after. */
const REDIS_PAUSED_MS = 3000

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms))

export class Faults {
  private round: FaultKind[] = []
  private readonly recoveries = new Set<Promise<void>>()
  private redisBusy = false
  /** The instance a fault hit last: the next instance fault prefers another. */
  private lastHit = -1
  private readonly docker = new Docker()

  constructor(
    private readonly c: Cluster,
    private readonly sessions: ChaosSession[],
    private readonly tally: Tally,
    private readonly rng: Rng,
    private readonly kinds: readonly FaultKind[],
  ) {}

  /** Injects the next fault of the seeded order. */
  async inject(): Promise<void> {
    if (!this.round.length) this.round = shuffle([...this.kinds], this.rng)
    const kind = this.round.shift()!
    try {
      await this.strike(kind)
    } catch (err) {
      this.tally.skip(kind, `it failed: ${(err as Error).message}`)
    }
  }

  /** Waits until every fault's recovery is over: all instances up, Redis running. */
  async settle(): Promise<void> {
    while (this.recoveries.size) await Promise.all([...this.recoveries])
  }

  private async strike(kind: FaultKind): Promise<void> {
    switch (kind) {
      case 'instance-kill':
        return this.onInstance(kind, async (i) => {
          const downMs = this.rng.int(INSTANCE_DOWN_MS / 3, INSTANCE_DOWN_MS)
          await i.kill()
          return async () => {
            await pause(downMs)
            await i.start()
          }
        })
      case 'instance-term':
        return this.onInstance(kind, async (i) => {
          const exited = i.stop('SIGTERM')
          return async () => {
            const code = await exited
            if (code !== '0') this.tally.violation('unclean_exit', `instance ${i.id} exited ${code} after SIGTERM`)
            await i.start()
          }
        })
      case 'instance-stop':
        return this.onInstance(kind, async (i) => {
          i.freeze()
          return async () => {
            await pause(INSTANCE_FROZEN_MS)
            i.thaw()
          }
        })
      case 'redis-kill':
        return this.onRedis(kind, async () => {
          await this.c.redis.crash()
          return async () => {
            await pause(REDIS_DOWN_MS)
            await this.c.redis.start()
          }
        })
      case 'redis-pause':
        return this.onRedis(kind, async () => {
          const pid = await this.c.redisPid()
          process.kill(pid, 'SIGSTOP')
          return async () => {
            await pause(REDIS_PAUSED_MS)
            process.kill(pid, 'SIGCONT')
          }
        })
      case 'sandbox-kill':
        return this.onSandbox(kind, async (container) => void (await container.kill()))
      case 'pid1-kill':
        // Its PID 1 dies under it, from the host: not through the engine, as a crash would look.
        return this.onSandbox(kind, async (container) => void process.kill((await container.inspect()).State.Pid, 'SIGKILL'))
    }
  }

  /**
   * An instance fault strikes an instance that is up, and only while another one is up to serve: one
   * holding sessions rather than one holding none (sessions move only when a fault moves them, so a
   * random pick would soon hit idle instances only), preferring another than the one hit last.
   */
  private async onInstance(kind: FaultKind, hit: (i: Instance) => Promise<() => Promise<void>>): Promise<void> {
    const up = this.c.instances.filter((i) => i.state === 'up')
    if (up.length < 2) return this.tally.skip(kind, 'no other instance is up')
    const held = await this.c.holders(this.sessions.filter((s) => !s.lost).map((s) => s.sid))
    const weight = (i: Instance) => (held.get(i.id) ?? 0) + 0.1 + (i.index === this.lastHit ? 0 : 0.5)
    const target = this.rng.weighted(up.map((i) => [weight(i), i] as const))
    this.lastHit = target.index
    this.tally.fault(kind, `${target.id} (holding ${held.get(target.id) ?? 0} sessions)`)
    this.recover(await hit(target))
  }

  private async onRedis(kind: FaultKind, hit: () => Promise<() => Promise<void>>): Promise<void> {
    if (this.redisBusy) return this.tally.skip(kind, 'Redis is still recovering from the last fault')
    this.redisBusy = true
    try {
      const back = await hit()
      this.tally.fault(kind, 'redis')
      this.recover(async () => {
        try {
          await back()
        } finally {
          this.redisBusy = false
        }
      })
    } catch (err) {
      this.redisBusy = false
      throw err
    }
  }

  /** A sandbox fault strikes a running session's sandbox; the session is told first (its checks allow for a fresh namespace). */
  private async onSandbox(kind: FaultKind, hit: (c: Docker.Container) => Promise<void>): Promise<void> {
    const s = this.rng.pick(this.sessions.filter((x) => !x.lost))
    const [info] = await this.docker.listContainers({
      filters: { label: [`${LABEL.session}=${s.sid}`, `${LABEL.deployment}=${this.c.deployment}`], status: ['running'] },
    })
    if (!info) return this.tally.skip(kind, `session ${s.label} has no running sandbox`)
    s.sandboxKills++
    this.tally.fault(kind, `session ${s.label} (${s.sid})`)
    await hit(this.docker.getContainer(info.Id))
  }

  private recover(back: () => Promise<void>): void {
    const p = back().catch((err) => this.tally.violation('unexpected', `a recovery failed: ${(err as Error).message}`))
    const done: Promise<void> = p.then(() => void this.recoveries.delete(done))
    this.recoveries.add(done)
  }
}

/** Fisher–Yates with the seeded generator. */
function shuffle<T>(xs: T[], rng: Rng): T[] {
  for (let i = xs.length - 1; i > 0; i--) {
    const j = rng.int(0, i)
    ;[xs[i], xs[j]] = [xs[j]!, xs[i]!]
  }
  return xs
}
