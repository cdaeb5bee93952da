// Refuses a new sandbox (503 capacity) when the memory limits of the Docker engine's sandboxes
// would pass HOST_MEMORY_SHARE of the host's memory, so that a host short of memory is never
// promised more than it has and its OOM killer is not left choosing Redis, dockerd or the API.
import type { Logger } from 'pino'
import { AppError } from '../../errors.js'
import type { SandboxMemory } from '../../sandbox/driver.js'

/** Seconds a refused client is told to wait: sandboxes come and go at the pace of idle timeouts and deletes. */
const RETRY_AFTER_S = 10
const MIB = 1024 * 1024
/**
 * How long the engine's last listing stands in for a new one before a sandbox is made. Never wrong
 * for long: a place it grants is counted again once the sandbox exists (confirm, always listed
 * anew), and a refusal is only given from a new listing.
 */
const LISTING_FRESH_MS = 2000

export interface CapacityPlace {
  /** Counts the engine again once the sandbox exists (another instance may have started one meanwhile); throws capacity. */
  confirm(): Promise<void>
  /** Gives the place up: the engine lists the sandbox now, or it was never made. */
  release(): void
}

/** The host's memory and the memory limit of each sandbox the engine lists, by session id. */
interface Listing {
  total: number
  listed: Map<string, number>
}

export class HostCapacity {
  /** Sandboxes this instance is making, by session id: counted until the engine lists them. */
  private readonly pending = new Map<string, number>()
  /** The engine's last listing (host memory and sandboxes' limits), and when it was asked for. */
  private last: (Listing & { at: number }) | null = null

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
    const { total, listed } = await this.list()
    let used = 0
    for (const b of new Map([...this.pending, ...listed]).values()) used += b
    return { totalBytes: total, freeBytes: Math.floor(this.share * total) - used, sandboxes: listed.size }
  }

  /** The engine's sandboxes and memory as it says now. */
  private async list(): Promise<Listing> {
    const at = Date.now()
    const [total, listed] = await Promise.all([this.memory.totalBytes(), this.memory.sandboxLimits()])
    if (!this.last || this.last.at <= at) this.last = { at, total, listed }
    return { total, listed }
  }

  /**
   * With `bytes`, adds the session to the pending ones when it fits (from the last listing when it
   * is fresh); with null, checks the sum as the engine has it now.
   */
  private async check(sessionId: string, bytes: number | null): Promise<void> {
    const recent = bytes !== null && this.last && Date.now() - this.last.at < LISTING_FRESH_MS ? this.last : null
    // From a sum on, nothing is awaited: concurrent checks of this instance see each other's places.
    if (recent && this.sum(sessionId, bytes, recent).fits) {
      this.pending.set(sessionId, bytes!)
      return
    }
    let engine: Listing
    try {
      engine = await this.list()
    } catch (err) {
      throw new AppError('sandbox_failed', 'the Docker engine could not be asked what its sandboxes use', { cause: err })
    }
    const s = this.sum(sessionId, bytes, engine)
    if (!s.fits) {
      const askedMib = Math.round(s.asked / MIB)
      // The figures are for the operator: a client must not learn what other tenants' sandboxes hold.
      this.log.warn(
        { sessionId, askedMib, committedMib: Math.round(s.used / MIB), allowedMib: Math.round(s.allowed / MIB), sandboxes: s.count },
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

  /** The memory promised with this instance's places (and the session's, with `bytes`) beside the listed sandboxes. */
  private sum(sessionId: string, bytes: number | null, engine: Listing): { fits: boolean; asked: number; used: number; allowed: number; count: number } {
    const all = new Map([...this.pending, ...engine.listed])
    if (bytes !== null) all.set(sessionId, bytes)
    let used = 0
    for (const b of all.values()) used += b
    const allowed = Math.floor(this.share * engine.total)
    return { fits: used <= allowed, asked: all.get(sessionId) ?? 0, used, allowed, count: all.size }
  }
}
