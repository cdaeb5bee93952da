// How failing creates slow the warm pool's refills (pool.ts): after each failure in a row the next
// create waits 1 s, 2 s, 4 s ...; after GIVE_UP_AFTER of them refilling pauses for RETRY_LATER_MS.
// A broken image or a full host must not make the pool spin.
import type { Logger } from 'pino'

/** Backoff after the first failure, doubled after each further one. */
const BACKOFF_BASE_MS = 1000
/** After this many failures in a row refilling stops, and is tried again after RETRY_LATER_MS. */
const GIVE_UP_AFTER = 6
const RETRY_LATER_MS = 60_000

export class RefillBackoff {
  private failures = 0
  private pausedUntil = 0

  constructor(private readonly log: Logger) {}

  /** How long refills must still wait (0: not at all). */
  waitMs(now = Date.now()): number {
    return Math.max(0, this.pausedUntil - now)
  }

  /** A create succeeded: the next failure starts the backoff over. */
  succeeded(): void {
    this.failures = 0
  }

  /** Counts a failure and pushes the next create back. */
  failed(err: unknown): void {
    this.failures++
    const giveUp = this.failures >= GIVE_UP_AFTER
    const delay = giveUp ? RETRY_LATER_MS : Math.min(BACKOFF_BASE_MS * 2 ** (this.failures - 1), RETRY_LATER_MS)
    this.pausedUntil = Math.max(this.pausedUntil, Date.now() + delay)
    if (giveUp) this.log.error({ err, failures: this.failures, retryInMs: delay }, 'the warm pool cannot make sandboxes; refilling stopped for now')
    else this.log.warn({ err, failures: this.failures, retryInMs: delay }, 'could not make a pooled sandbox; backing off')
  }
}
