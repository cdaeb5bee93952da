// Refuses a new sandbox (503 capacity) when the memory limits of the Docker engine's sandboxes
// would pass HOST_MEMORY_SHARE of the host's memory, so that a host short of memory is never
// promised more than it has and its OOM killer is not left choosing Redis, dockerd or the API.
import type { Logger } from 'pino'
import { AppError } from '../errors.js'
import type { SandboxMemory } from '../sandbox/driver.js'

/** Seconds a refused client is told to wait: sandboxes come and go at the pace of idle timeouts and deletes. */
const RETRY_AFTER_S = 10
const MIB = 1024 * 1024

export interface CapacityPlace {
  /** Counts the engine again once the sandbox exists (another instance may have started one meanwhile); throws capacity. */
  confirm(): Promise<void>
  /** Gives the place up: the engine lists the sandbox now, or it was never made. */
  release(): void
}

export class HostCapacity {
  /** Sandboxes this instance is making, by session id: counted until the engine lists them. */
  private readonly pending = new Map<string, number>()

  constructor(
    private readonly memory: SandboxMemory,
    private readonly share: number,
    private readonly log: Logger,
  ) {}

  /**
   * Takes a place for a sandbox of `memoryMb` or throws capacity (503, Retry-After). Places taken
   * here are exact within this instance; between instances the engine is counted again after the
   * sandbox is made (`confirm`), so near the limit two instances may both refuse, never both admit.
   */
  async reserve(sessionId: string, memoryMb: number): Promise<CapacityPlace> {
    await this.check(sessionId, memoryMb * MIB)
    return {
      confirm: () => this.check(sessionId, null),
      release: () => this.pending.delete(sessionId),
    }
  }

  /** What the engine's sandboxes may still be promised (places this instance holds counted), for its report in Redis. */
  async figures(): Promise<{ totalBytes: number; freeBytes: number; sandboxes: number }> {
    const [total, listed] = await Promise.all([this.memory.totalBytes(), this.memory.sandboxLimits()])
    let used = 0
    for (const b of new Map([...this.pending, ...listed]).values()) used += b
    return { totalBytes: total, freeBytes: Math.floor(this.share * total) - used, sandboxes: listed.size }
  }

  /** With `bytes`, adds the session to the pending ones when it fits; with null, checks the sum as it is. */
  private async check(sessionId: string, bytes: number | null): Promise<void> {
    let total: number
    let listed: Map<string, number>
    try {
      ;[total, listed] = await Promise.all([this.memory.totalBytes(), this.memory.sandboxLimits()])
    } catch (err) {
      throw new AppError('sandbox_failed', 'the Docker engine could not be asked what its sandboxes use', { cause: err })
    }
    // From here on nothing is awaited: concurrent checks of this instance see each other's places.
    const all = new Map([...this.pending, ...listed])
    if (bytes !== null) all.set(sessionId, bytes)
    let used = 0
    for (const b of all.values()) used += b
    const allowed = Math.floor(this.share * total)
    if (used > allowed) {
      const askedMib = Math.round((all.get(sessionId) ?? 0) / MIB)
      // The figures are for the operator: a client must not learn what other tenants' sandboxes hold.
      this.log.warn(
        { sessionId, askedMib, committedMib: Math.round(used / MIB), allowedMib: Math.round(allowed / MIB), sandboxes: all.size },
        'host memory share reached: session refused',
      )
      throw new AppError(
        'capacity',
        `this host has no memory left for another sandbox of ${askedMib} MiB (its sandboxes' memory limits would pass HOST_MEMORY_SHARE of its memory); retry later, or ask for less memory`,
        { headers: { 'retry-after': String(RETRY_AFTER_S) } },
      )
    }
    if (bytes !== null) this.pending.set(sessionId, bytes)
  }
}
