// A `done` from the REPL may be forged by the code it ends (they share a process), so the tenant's
// slot of an execution that ends while another waits behind it is kept until that next execution
// really starts in the REPL (its `status running`, which the REPL only sends once the main thread is
// free) or ends. Without a next execution the slot is freed at `done`: see docs/security.md.
import type { Logger } from 'pino'
import type { Config } from '../../config.js'
import type { QuotaStore } from '../../store/quota-store.js'
import type { PendingExecution } from './execution.js'
import type { LiveSession } from './live-session.js'

/** Members of the tenant's slot set that are holds, not executions, end with this. */
const HOLD_SUFFIX = ':held'

export class SlotHolds {
  /** Per session: the member holding the slot of the execution that ended last. */
  private readonly held = new WeakMap<LiveSession, string>()

  constructor(
    private readonly config: Config,
    private readonly quotas: Pick<QuotaStore, 'acquireRunningSlot' | 'releaseRunningSlot'>,
    private readonly log: Logger,
  ) {}

  /** `ended` ended with a REPL `done` while others wait: its slot is kept until the next one starts. */
  async hold(live: LiveSession, ended: PendingExecution): Promise<void> {
    const waiting = live.work.queue
    if (waiting.length === 0) return
    await this.release(live)
    const member = ended.id + HOLD_SUFFIX
    // At the latest it lapses when everything waiting now could have timed out.
    const until = Date.now() + waiting.reduce((ms, q) => ms + q.timeoutMs + this.config.INTERRUPT_GRACE_MS, 0)
    try {
      // Not a new slot but the ended execution's own, kept: taken whatever the count.
      await this.quotas.acquireRunningSlot(live.tenant, member, Number.MAX_SAFE_INTEGER, until)
      this.held.set(live, member)
    } catch (err) {
      this.log.warn({ err, sessionId: live.id }, 'could not keep the slot of an ended execution')
    }
  }

  /** The next execution started in the REPL, or ended (`ended`; not the one whose slot is kept): the kept slot is freed. */
  async release(live: LiveSession, ended?: PendingExecution): Promise<void> {
    const member = this.held.get(live)
    if (!member || (ended && member === ended.id + HOLD_SUFFIX)) return
    this.held.delete(live)
    await this.quotas.releaseRunningSlot(live.tenant, member).catch((err: unknown) => this.log.warn({ err, sessionId: live.id }, 'could not free a kept slot'))
  }
}
