// Taking over the sessions of instances that are gone, without waiting for a request: on every pass
// (the reaper's interval) each known instance whose heartbeat lapsed has its sessions adopted by the
// survivors, and at once when a stopping instance says on the cluster channel that it handed over.
// Each survivor goes through the sessions in its own random order; a session's lease decides which
// one adopts it, so the work spreads and no session is adopted twice.
import type { Redis } from 'ioredis'
import type { Logger } from 'pino'
import type { RedisKeys } from '../store/keys.js'
import type { InstanceDirectory } from './directory.js'
import type { SessionHolding } from './routing.js'

/** Sessions adopted at once from one instance. */
const PARALLEL = 4

export interface FailoverDeps {
  redis: Redis
  keys: RedisKeys
  instanceId: string
  directory: InstanceDirectory
  sessions: SessionHolding
  log: Logger
}

export class Failover {
  /** Take-overs under way, by the instance that is gone: a pass and a hand-over message never run one twice. */
  private readonly running = new Map<string, Promise<void>>()

  constructor(private readonly deps: FailoverDeps) {}

  /** One pass: every instance whose heartbeat lapsed. */
  async sweep(): Promise<void> {
    await Promise.all((await this.deps.directory.gone()).map((id) => this.takeOverFrom(id)))
  }

  /** Adopts what `id` (gone, or handing over) held, unless another survivor is quicker for a session. */
  takeOverFrom(id: string): Promise<void> {
    if (id === this.deps.instanceId) return Promise.resolve()
    let p = this.running.get(id)
    if (!p) {
      p = this.run(id).finally(() => this.running.delete(id))
      this.running.set(id, p)
    }
    return p
  }

  private async run(id: string): Promise<void> {
    const { redis, keys, sessions, directory, log } = this.deps
    const queue = shuffle(await redis.smembers(keys.instanceSessions(id)))
    if (queue.length) log.info({ instance: id, sessions: queue.length }, 'taking over the sessions of an instance that is gone')
    const worker = async () => {
      for (let sid = queue.pop(); sid !== undefined; sid = queue.pop()) {
        await sessions.takeOver(sid, id).catch((err: unknown) => log.warn({ err, sessionId: sid, instance: id }, 'take-over failed; tried again next pass'))
      }
    }
    await Promise.all(Array.from({ length: Math.min(PARALLEL, queue.length) }, worker))
    await directory.dropIfEmpty(id)
  }
}

function shuffle<T>(xs: T[]): T[] {
  for (let i = xs.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1))
    ;[xs[i], xs[j]] = [xs[j]!, xs[i]!]
  }
  return xs
}
