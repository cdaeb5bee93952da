// Wakes readers of execution event logs when new events arrive: at once for events
// appended by this process, and through one XREAD BLOCK connection for events appended
// by other API instances. Readers re-read the stream themselves, so a wake-up is only a hint.
import type { Redis } from 'ioredis'
import type { Logger } from 'pino'
import type { LoggedEvent, RedisStore } from './redis-store.js'

const BLOCK_MS = 5000

export class EventFeed {
  private readonly watchers = new Map<string, Set<() => void>>()
  /** Keys some reader follows whose events another instance appends: watched with XREAD. */
  private readonly remote = new Map<string, number>()
  private readonly seen = new Map<string, string>()
  private blockingId: number | null = null
  /** Wakes the loop while it waits for its first remote key. */
  private kick: (() => void) | null = null
  private running = false
  private loopDone: Promise<void> | null = null

  constructor(
    private readonly store: RedisStore,
    private readonly blocking: Redis,
    private readonly log: Logger,
  ) {}

  start(): void {
    if (this.running) return
    this.running = true
    this.loopDone = this.loop()
  }

  async stop(): Promise<void> {
    this.running = false
    this.kick?.()
    await this.unblock()
    await this.loopDone
  }

  /** Wakes every reader of this execution's log. */
  notify(sid: string, eid: string): void {
    for (const cb of this.watchers.get(this.store.keys.events(sid, eid)) ?? []) cb()
  }

  /** Local watchers are woken by notify() only; remote ones also by the XREAD loop. */
  private watch(key: string, cb: () => void, remote: boolean): () => void {
    let set = this.watchers.get(key)
    if (!set) this.watchers.set(key, (set = new Set()))
    set.add(cb)
    if (remote) {
      const n = this.remote.get(key) ?? 0
      this.remote.set(key, n + 1)
      if (n === 0) {
        this.seen.set(key, '0-0')
        this.kick?.()
        void this.unblock()
      }
    }
    return () => {
      set.delete(cb)
      if (set.size === 0) this.watchers.delete(key)
      if (!remote) return
      const n = (this.remote.get(key) ?? 1) - 1
      if (n > 0) this.remote.set(key, n)
      else {
        this.remote.delete(key)
        this.seen.delete(key)
      }
    }
  }

  /**
   * Calls `onEvent` for every event after `afterId`, in order and once each, until the `done`
   * event or until `signal` aborts. Resolves true when `done` was delivered. `local`: the events
   * are appended by this process (no need to watch Redis for them).
   */
  async follow(
    sid: string,
    eid: string,
    afterId: string,
    onEvent: (e: LoggedEvent) => Promise<void> | void,
    signal: AbortSignal,
    local = false,
  ): Promise<boolean> {
    let last = afterId
    let dirty = true
    let wake: (() => void) | null = null
    const unwatch = this.watch(
      this.store.keys.events(sid, eid),
      () => {
        dirty = true
        wake?.()
      },
      !local,
    )
    const onAbort = () => wake?.()
    signal.addEventListener('abort', onAbort)
    let quiet = false
    try {
      while (!signal.aborted) {
        if (!dirty) {
          quiet = await new Promise<boolean>((resolve) => {
            wake = () => resolve(false)
            // Belt and braces against a lost wake-up, and a liveness check (below) when nothing comes.
            const t = setTimeout(() => resolve(true), BLOCK_MS * 2)
            t.unref()
          })
          wake = null
          dirty = true
          continue
        }
        dirty = false
        const events = await this.store.readEvents(sid, eid, last)
        for (const e of events) {
          if (signal.aborted) return false
          await onEvent(e)
          last = e.id
          if (e.type === 'done') return true
        }
        if (events.length > 0) {
          dirty = true
          continue
        } // there may be more than one page
        // Nothing new for a while: stop if the execution is gone, or ended with no `done` after `last`
        // (the client resumed past it, or the log was trimmed or expired).
        if (quiet && !(await this.executionLive(sid, eid))) return false
      }
      return false
    } finally {
      signal.removeEventListener('abort', onAbort)
      unwatch()
    }
  }

  private async executionLive(sid: string, eid: string): Promise<boolean> {
    const ex = await this.store.getExecution(sid, eid)
    return ex !== null && (ex.status === 'queued' || ex.status === 'running')
  }

  private async unblock(): Promise<void> {
    if (this.blockingId === null) return
    try {
      await this.store.redis.client('UNBLOCK', this.blockingId)
    } catch {
      /* not blocked */
    }
  }

  private async loop(): Promise<void> {
    try {
      this.blockingId = Number(await this.blocking.client('ID'))
    } catch (err) {
      this.log.warn({ err }, 'event feed: no client id')
    }
    while (this.running) {
      const keys = [...this.remote.keys()]
      if (keys.length === 0) {
        await new Promise<void>((r) => {
          this.kick = r
        })
        this.kick = null
        continue
      }
      try {
        // One entry per key, then on to the log's newest: only ids matter here (readers re-read the log
        // from their own position, in bounded pages), and a thousand entries of a large log would be
        // hundreds of MB read for nothing.
        const res = await this.blocking.xread('COUNT', 1, 'BLOCK', BLOCK_MS, 'STREAMS', ...keys, ...keys.map((k) => this.seen.get(k) ?? '0-0'))
        for (const [key, entries] of res ?? []) {
          const lastEntry = entries[entries.length - 1]
          if (lastEntry && this.remote.has(key)) {
            const [newest] = await this.store.redis.xrevrange(key, '+', '-', 'COUNT', 1)
            if (this.remote.has(key)) this.seen.set(key, newest?.[0] ?? lastEntry[0])
          }
          for (const cb of this.watchers.get(key) ?? []) cb()
        }
      } catch (err) {
        if (!this.running) break
        this.log.warn({ err }, 'event feed: XREAD failed, retrying')
        await new Promise<void>((r) => {
          const t = setTimeout(r, 500)
          t.unref()
        })
      }
    }
  }
}
