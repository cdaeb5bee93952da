// The cluster's channel: an instance that stops names itself on it, and the others take its sessions
// over at once. The connection only listens; after a reconnect (a Redis restart, a Sentinel failover)
// it subscribes again itself, with its reply handled: ioredis's own resubscription leaves that reply's
// promise unhandled, and a close that lands before the reply rejects it (an unhandled rejection).
import type { Redis } from 'ioredis'
import type { Logger } from 'pino'

export class ClusterChannel {
  private subscribed = false

  /** `conn`: a connection of its own (lazy), closed by close(). */
  constructor(
    private readonly conn: Redis,
    private readonly name: string,
    log: Logger,
  ) {
    conn.options.autoResubscribe = false
    conn.on('error', (err: Error) => log.warn({ err: { message: err.message } }, 'redis subscriber connection error'))
    conn.on('ready', () => {
      if (!this.subscribed) return
      conn.subscribe(name).catch((err: unknown) => {
        if (this.subscribed) log.warn({ err }, 'could not subscribe to the cluster channel again; it is tried at the next reconnect')
      })
    })
  }

  /** Connects and subscribes: `onMessage` gets every message published from then on. */
  async listen(onMessage: (message: string) => void): Promise<void> {
    this.conn.on('message', (channel: string, message: string) => {
      if (channel === this.name) onMessage(message)
    })
    await this.conn.connect()
    await this.conn.subscribe(this.name)
    this.subscribed = true
  }

  close(): void {
    this.subscribed = false
    this.conn.disconnect()
  }
}
