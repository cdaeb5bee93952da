// Feeds readers of execution event logs. Events this process appended are handed over as they are
// (deliver), once Redis has stored them, so a local reader needs no Redis read; a reader that joins
// late, falls behind, or finds a gap reads the stream itself, woken at once for events appended
// here and through one XREAD BLOCK connection for events appended by other API instances.
import type { Redis } from 'ioredis'
import type { Logger } from 'pino'
import { isRedisUnavailable, retry } from '../retry.js'
import type { Appended } from './event-bytes.js'
import { LogReader } from './log-reader.js'
import type { LoggedEvent } from './records.js'
import type { Stores } from './stores.js'

const BLOCK_MS = 5000

interface Watcher {
  /** Something was appended that the reader must read from Redis. */
  wake(): void
  /** Entries this process appended, in the order Redis stored them. */
  deliver(a: Appended): void
}

export class EventFeed {
  private readonly watchers = new Map<string, Set<Watcher>>()
  /** Keys some reader follows whose events another instance appends: watched with XREAD. */
  private readonly remote = new Map<string, number>()
  private readonly seen = new Map<string, string>()
  private blockingId: number | null = null
  /** Wakes the loop while it waits for its first remote key. */
  private kick: (() => void) | null = null
  private running = false
  private loopDone: Promise<void> | null = null

  constructor(
    private readonly stores: Pick<Stores, 'redis' | 'keys' | 'logs' | 'executions'>,
    private readonly blocking: Redis,
    private readonly log: Logger,
    /** Counts reads tried again while Redis could not answer. */
    private readonly readRetries: { inc(): void } = { inc: () => undefined },
  ) {
    // A new connection (after a Redis restart or failover) has a new id: read again before the next XREAD.
    blocking.on('close', () => {
      this.blockingId = null
    })
  }

  start(): void {
    if (this.running) return
    this.running = true
    this.loopDone = this.loop()
  }

  /** Stops reading and closes the blocking connection (an XREAD under way ends with it). */
  async stop(): Promise<void> {
    this.running = false
    this.kick?.()
    this.blocking.disconnect()
    await this.loopDone
  }

  /** Wakes every reader of this execution's log (to read it from Redis). */
  notify(sid: string, eid: string): void {
    for (const w of this.watchers.get(this.stores.keys.events(sid, eid)) ?? []) w.wake()
  }

  /** Hands entries this process appended (null: nothing known) to every reader of the log. */
  deliver(sid: string, eid: string, added: Appended | null): void {
    if (!added) return this.notify(sid, eid)
    if (added.events.length === 0) return
    for (const w of this.watchers.get(this.stores.keys.events(sid, eid)) ?? []) w.deliver(added)
  }

  /** Local watchers are woken by notify() and deliver() only; remote ones also by the XREAD loop. */
  private watch(key: string, cb: Watcher, remote: boolean): () => void {
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
   * are appended by this process (no need to watch Redis for them). `seed`: the log's first entries,
   * as this process appended them (a reader from the start then reads Redis only if something is missing).
   */
  async follow(
    sid: string,
    eid: string,
    afterId: string,
    onEvent: (e: LoggedEvent) => Promise<void> | void,
    signal: AbortSignal,
    local = false,
    seed?: Appended,
  ): Promise<boolean> {
    return this.followLog(sid, eid, afterId, onEvent, signal, { local, seed, isLive: () => this.executionLive(sid, eid), endType: 'done' })
  }

  /**
   * Like follow, for any log of `events(sid, logId)` (a background process's output): until its
   * `endType` event; `isLive` says whether more can still come to it.
   */
  async followLog(
    sid: string,
    logId: string,
    afterId: string,
    onEvent: (e: LoggedEvent) => Promise<void> | void,
    signal: AbortSignal,
    opts: { local: boolean; seed?: Appended; isLive: () => Promise<boolean>; endType: string },
  ): Promise<boolean> {
    const reader = new LogReader({
      afterId,
      seed: opts.seed,
      onEvent,
      signal,
      readPage: (after) => this.answered(() => this.stores.logs.readEventPage(sid, logId, after), signal),
      isLive: () => this.answered(opts.isLive, signal),
      quietMs: BLOCK_MS * 2,
      endType: opts.endType,
    })
    const unwatch = this.watch(this.stores.keys.events(sid, logId), reader, !opts.local)
    try {
      return await reader.run()
    } finally {
      unwatch()
    }
  }

  /**
   * A reader's read of Redis, tried again (0.1 s, then up to 2 s apart) while Redis cannot answer (a
   * restart, a Sentinel failover) for as long as the reader stays: it then goes on where it was.
   * A fault of this process's own, like a log entry that does not parse, is not waited out. Null:
   * the reader left meanwhile.
   */
  private async answered<T>(read: () => Promise<T>, signal: AbortSignal): Promise<T | null> {
    try {
      return await retry(read, {
        retryable: (err) => isRedisUnavailable(err) && !(err instanceof TypeError || err instanceof SyntaxError),
        onRetry: () => this.readRetries.inc(),
        signal,
      })
    } catch (err) {
      if (signal.aborted) return null
      throw err
    }
  }

  private async executionLive(sid: string, eid: string): Promise<boolean> {
    const ex = await this.stores.executions.getExecution(sid, eid)
    return ex !== null && (ex.status === 'queued' || ex.status === 'running')
  }

  private async unblock(): Promise<void> {
    if (this.blockingId === null) return
    try {
      await this.stores.redis.client('UNBLOCK', this.blockingId)
    } catch {
      /* not blocked */
    }
  }

  private async loop(): Promise<void> {
    while (this.running) {
      if (this.remote.size === 0) {
        await new Promise<void>((r) => {
          this.kick = r
        })
        this.kick = null
        continue
      }
      try {
        // (an XREAD ioredis sends again on a new connection still runs under the old id: a kick may wait for its end)
        this.blockingId ??= Number(await this.blocking.client('ID'))
        // The keys as they are now, in the same turn as the XREAD is written: a key watched before it goes with it.
        const keys = [...this.remote.keys()]
        if (keys.length === 0) continue
        // One entry per key, then on to the log's newest: only ids matter here (readers re-read the log
        // from their own position, in bounded pages), and a thousand entries of a large log would be
        // hundreds of MB read for nothing.
        const res = await this.blocking.xread('COUNT', 1, 'BLOCK', BLOCK_MS, 'STREAMS', ...keys, ...keys.map((k) => this.seen.get(k) ?? '0-0'))
        for (const [key, entries] of res ?? []) {
          const lastEntry = entries[entries.length - 1]
          if (lastEntry && this.remote.has(key)) {
            const [newest] = await this.stores.redis.xrevrange(key, '+', '-', 'COUNT', 1)
            if (this.remote.has(key)) this.seen.set(key, newest?.[0] ?? lastEntry[0])
          }
          for (const w of this.watchers.get(key) ?? []) w.wake()
        }
      } catch (err) {
        if (!this.running) break
        this.log.warn({ err }, 'event feed: reading the remote logs failed, retrying')
        await new Promise<void>((r) => {
          const t = setTimeout(r, 500)
          t.unref()
        })
      }
    }
  }
}
