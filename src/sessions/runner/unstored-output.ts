// Output sent to Redis and not stored yet, across this instance's sessions. One Redis connection
// carries every session's writes in order, so what waits on it delays everyone's next write (a
// neighbour's start and end too): the total is bounded and shared. A session past its share (the
// bound split between the sessions with output in flight) is held back, its sandbox's writes
// blocking, until Redis has stored all but a quarter of a share of it.

/** Output in flight to Redis across this instance's sessions, in bytes (a session alone may send this much). */
export const UNSTORED_TOTAL_BYTES = 512 << 10
/** The least share of a session however many share the bound. */
export const MIN_SHARE_BYTES = 32 << 10

export class UnstoredOutput<S> {
  private readonly sessions = new Map<S, { bytes: number; held: boolean }>()

  /** `hold(s, true)` holds a session's output back, `hold(s, false)` lets it come again. */
  constructor(private readonly hold: (session: S, on: boolean) => void) {}

  /** Bytes of `session` sent to Redis. */
  sent(session: S, bytes: number): void {
    let u = this.sessions.get(session)
    if (!u) this.sessions.set(session, (u = { bytes: 0, held: false }))
    u.bytes += bytes
    if (!u.held && u.bytes > this.share()) {
      u.held = true
      this.hold(session, true)
    }
  }

  /** Bytes of `session` Redis has stored (or refused: no longer waiting either way). */
  stored(session: S, bytes: number): void {
    const u = this.sessions.get(session)
    if (!u) return
    u.bytes -= bytes
    if (u.held && u.bytes <= this.share() / 4) {
      u.held = false
      this.hold(session, false)
    }
    if (!u.held && u.bytes <= 0) this.sessions.delete(session)
  }

  private share(): number {
    return Math.max(MIN_SHARE_BYTES, UNSTORED_TOTAL_BYTES / this.sessions.size)
  }
}
