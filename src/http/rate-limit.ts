// The per-tenant request rate (rate_per_min), counted in memory and reconciled with Redis, so that
// a request does not wait for Redis. A tenant's first request of each minute on this instance asks
// Redis for the count so far (INCRBY); after that requests are counted here and their count is
// added to Redis every FLUSH_MS, which answers with the total of all instances. Several instances
// can let a tenant pass its limit by what they admit within one flush interval (docs/security.md).
import type { QuotaStore } from '../store/quota-store.js'

const FLUSH_MS = 100

interface Window {
  minute: number
  /** The tenant's count in Redis at the last flush (every instance's requests). */
  known: number
  /** Counted here and on their way to Redis in a flush whose reply has not come (not yet in `known`). */
  sending: number
  /** Counted here since then. */
  unflushed: number
  /** The first request's INCRBY, which later ones of the minute wait for. */
  ready: Promise<void> | null
}

export class RateLimiter {
  private readonly windows = new Map<string, Window>()
  private timer: NodeJS.Timeout | null = null
  private flushing: Promise<void> | null = null

  constructor(
    private readonly quotas: Pick<QuotaStore, 'addRequests'>,
    private readonly onError: (err: unknown) => void,
    private readonly now: () => number = Date.now,
  ) {}

  /** Counts one request of `tenant` at `nowMs`; false (with the time until the minute ends) when it is over `perMinute`. */
  async take(tenant: string, perMinute: number, nowMs: number): Promise<{ ok: boolean; resetMs: number }> {
    const minute = Math.floor(nowMs / 60000)
    const resetMs = (minute + 1) * 60000 - nowMs
    let w = this.windows.get(tenant)
    if (!w || w.minute !== minute) {
      const fresh: Window = { minute, known: 0, sending: 0, unflushed: 0, ready: null }
      fresh.ready = this.quotas.addRequests(tenant, minute, 1).then(
        (count) => {
          fresh.known = count
          fresh.ready = null
        },
        (err: unknown) => {
          // Redis is away: the count goes in with the next flush.
          fresh.unflushed++
          fresh.ready = null
          this.schedule()
          throw err
        },
      )
      this.windows.set(tenant, (w = fresh))
      await w.ready
      return { ok: w.known + w.unflushed <= perMinute, resetMs }
    }
    if (w.ready) await w.ready.catch(() => undefined)
    if (w.known + w.sending + w.unflushed + 1 > perMinute) return { ok: false, resetMs }
    w.unflushed++
    this.schedule()
    return { ok: true, resetMs }
  }

  private schedule(): void {
    if (this.timer) return
    this.timer = setTimeout(() => {
      this.timer = null
      this.flushing = this.flush().finally(() => (this.flushing = null))
    }, FLUSH_MS)
    this.timer.unref()
  }

  /** Adds what was counted here to Redis and learns every instance's total. */
  private async flush(): Promise<void> {
    await Promise.all(
      [...this.windows].map(async ([tenant, w]) => {
        const n = w.unflushed
        if (n === 0) {
          // A minute that is over and fully counted is forgotten.
          if (w.minute < Math.floor(this.now() / 60000)) this.windows.delete(tenant)
          return
        }
        w.unflushed -= n
        w.sending += n
        try {
          w.known = await this.quotas.addRequests(tenant, w.minute, n)
        } catch (err) {
          w.unflushed += n
          this.onError(err)
        } finally {
          w.sending -= n
        }
        if (w.unflushed > 0) this.schedule()
      }),
    )
  }

  /** Sends what is still counted only here. */
  async close(): Promise<void> {
    if (this.timer) clearTimeout(this.timer)
    this.timer = null
    await this.flushing
    await this.flush()
  }
}
