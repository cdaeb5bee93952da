// Log lines a sandbox can cause (bad frames, its stderr) are rate-limited per session: the first
// few of each interval are written, the rest only counted, and one summary line says how many were
// suppressed. A sandbox can then neither flood the API's log nor stall its event loop with logging.
import type { Logger } from 'pino'

/** Lines written per session and interval before the rest are only counted. */
export const SANDBOX_LOG_LINES = 20
const SANDBOX_LOG_INTERVAL_MS = 10_000

export class LimitedLog {
  private windowStart = -Infinity
  private written = 0
  private suppressed = 0
  private timer: NodeJS.Timeout | null = null

  constructor(
    private readonly log: Logger,
    private readonly lines = SANDBOX_LOG_LINES,
    private readonly intervalMs = SANDBOX_LOG_INTERVAL_MS,
  ) {}

  warn(obj: object, msg: string): void {
    const now = Date.now()
    if (now - this.windowStart >= this.intervalMs) {
      this.flush()
      this.windowStart = now
      this.written = 0
    }
    if (this.written < this.lines) {
      this.written++
      this.log.warn(obj, msg)
      return
    }
    this.suppressed++
    if (!this.timer) {
      // The summary is written when the interval ends even if the sandbox goes quiet.
      this.timer = setTimeout(() => this.flush(), this.windowStart + this.intervalMs - now)
      this.timer.unref()
    }
  }

  /** Writes one line counting what was suppressed since the last one (nothing when nothing was). */
  flush(): void {
    if (this.timer) clearTimeout(this.timer)
    this.timer = null
    if (this.suppressed === 0) return
    this.log.warn({ suppressed: this.suppressed }, 'sandbox-caused log lines suppressed')
    this.suppressed = 0
  }
}
