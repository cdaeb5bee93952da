// The sessions this instance is attached to, and the one way to let go of one.
import type { ExecutionRunner, LiveSession } from './runner/index.js'
import type { Metrics } from '../metrics.js'

export class SessionRegistry {
  private readonly live = new Map<string, LiveSession>()
  private readonly released: Array<(live: LiveSession) => void> = []

  constructor(
    private readonly runner: ExecutionRunner,
    private readonly metrics: Metrics,
  ) {}

  get(id: string): LiveSession | undefined {
    return this.live.get(id)
  }
  has(id: string): boolean {
    return this.live.has(id)
  }
  ids(): string[] {
    return [...this.live.keys()]
  }
  get size(): number {
    return this.live.size
  }

  add(live: LiveSession): void {
    this.live.set(live.id, live)
    this.metrics.sessionsAttached.set(this.live.size)
  }

  /** Calls `listener` each time a session is let go here (what holds on to it goes with it: its terminals). */
  onRelease(listener: (live: LiveSession) => void): void {
    this.released.push(listener)
  }

  /**
   * Lets go of a live session: its executions' timers stop, its channel closes (the sandbox keeps
   * running), it leaves the registry, and the release listeners are told. Safe to call twice; a
   * closing channel is then expected.
   */
  release(live: LiveSession): void {
    if (live.state === 'released') return
    live.state = 'released'
    this.runner.abandon(live)
    live.client.close()
    if (this.live.get(live.id) === live) this.live.delete(live.id)
    this.metrics.sessionsAttached.set(this.live.size)
    for (const listener of this.released) listener(live)
  }

  /** Releases every session (the service is closing; running executions go on in their sandboxes). */
  releaseAll(): void {
    for (const live of [...this.live.values()]) this.release(live)
  }
}
