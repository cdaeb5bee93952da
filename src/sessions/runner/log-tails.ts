// Where each execution's log ends, as this instance knows it from the replies to its own writes,
// so that events can be handed to local readers before Redis has stored them, under the ids Redis
// will give them (execution-log.ts, appendedAhead in store/event-bytes.ts). Known from the write
// that starts the log, for as long as every write after it was stored whole (none refused by the
// tenant's budget, none failed).
import type { Appended } from '../../store/event-bytes.js'
import type { PendingExecution } from './execution.js'

/**
 * Bytes of output (JSON) one execution may append ahead besides its end's: appended ahead, they are
 * kept whatever the tenant's max_event_bytes, which a tenant's logs may pass by this much per execution.
 */
const AHEAD_BYTES_PER_EXECUTION = 16 * 1024

interface Tail {
  /** The id of the log's last entry; null: not known (a write was refused or failed). */
  last: string | null
  /** Writes sent and not answered yet. */
  inFlight: number
  /** Bytes of output appended ahead so far. */
  ahead: number
}

export class LogTails {
  private readonly tails = new WeakMap<PendingExecution, Tail>()

  /** The write that started the log of `ex` added `added` (its first event). Only an execution's own log is started here. */
  started(ex: PendingExecution, added: Appended | null): void {
    this.tails.set(ex, { last: added?.events.length === 1 && added.own === 1 ? added.events[0]!.id : null, inFlight: 0, ahead: 0 })
  }

  /** A write of `count` events of its own to the log of `ex` was sent; call the function it returns with its reply (null: failed). */
  sending(ex: PendingExecution, count: number): (added: Appended | null) => void {
    const tail = this.tails.get(ex)
    if (!tail) return () => undefined
    tail.inFlight++
    return (added) => {
      tail.inFlight--
      // Replies come in the order the writes were sent (one connection): this is the newest stored.
      const whole = added !== null && added.own === count && added.events.length === count
      tail.last = tail.last !== null && whole ? added.events.at(-1)!.id : null
    }
  }

  /** The id the log of `ex` ends at, when it is known and no write to it is under way. */
  settled(ex: PendingExecution): string | null {
    const tail = this.tails.get(ex)
    return tail && tail.inFlight === 0 ? tail.last : null
  }

  /** Whether output `ahead` (see appendedAhead) fits what `ex` may still append ahead; counted when it does. */
  spend(ex: PendingExecution, ahead: Appended): boolean {
    const tail = this.tails.get(ex)
    if (!tail || tail.ahead + ahead.bytes > AHEAD_BYTES_PER_EXECUTION) return false
    tail.ahead += ahead.bytes
    return true
  }
}
