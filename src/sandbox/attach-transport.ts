// The REPL channel over a container's attach stream: demultiplexed (stdout to the REPL client, the
// sandbox's stderr to the log, bounded), with what arrives before the client listens kept for it.
import type { Duplex } from 'node:stream'
import type { Logger } from 'pino'
import { LimitedLog } from '../repl/limited-log.js'
import type { ReplTransport } from '../repl/transport.js'
import { DockerDemuxer } from './demux.js'

const STDERR_LOG_LIMIT = 64 * 1024
/** What arrives before the REPL client listens (its `ready` can come first on a quick start) is kept up to this. */
const EARLY_DATA_BYTES = 1 << 20

export class AttachTransport implements ReplTransport {
  private dataCb: ((chunk: Buffer) => void) | null = null
  /** Stdout that came before onData: handed over, in order, when it is set. */
  private early: Buffer[] = []
  private earlyBytes = 0
  private closeCbs: Array<(err?: Error) => void> = []
  private closed = false
  private stderrLogged = 0

  constructor(
    private readonly socket: Duplex,
    log: Logger,
  ) {
    // Sandbox code can write to the container's stderr too: bounded in bytes and in lines per interval.
    const stderrLog = new LimitedLog(log)
    const demux = new DockerDemuxer(
      (b) => this.deliver(b),
      (b) => {
        if (this.stderrLogged >= STDERR_LOG_LIMIT) return
        this.stderrLogged += b.length
        stderrLog.warn({ stderr: b.toString('utf8').slice(0, 4096) }, 'sandbox stderr')
      },
      (reason) => {
        // The stream lost its framing: nothing after this point can be trusted, so the channel ends.
        log.error({ reason }, 'attach stream is not multiplexed; closing it')
        socket.destroy()
        this.finish(new Error(reason))
      },
    )
    socket.on('data', (chunk: Buffer) => demux.push(chunk))
    socket.on('error', (err) => this.finish(err))
    socket.on('close', () => this.finish())
    socket.on('end', () => this.finish())
  }

  write(data: string): void {
    if (!this.closed) this.socket.write(data)
  }

  bufferedBytes(): number {
    return this.socket.writableLength
  }

  pause(): void {
    this.socket.pause()
  }

  resume(): void {
    this.socket.resume()
  }

  onData(cb: (chunk: Buffer) => void): void {
    this.dataCb = cb
    const early = this.early
    this.early = []
    for (const b of early) cb(b)
  }
  onClose(cb: (err?: Error) => void): void {
    this.closeCbs.push(cb)
  }

  close(): void {
    this.socket.destroy()
    this.finish()
  }

  private deliver(b: Buffer): void {
    if (this.dataCb) return this.dataCb(b)
    // Past the bound the excess is dropped: the client sees a broken line and says so.
    if (this.earlyBytes + b.length > EARLY_DATA_BYTES) return
    this.earlyBytes += b.length
    this.early.push(b)
  }

  private finish(err?: Error): void {
    if (this.closed) return
    this.closed = true
    for (const cb of this.closeCbs) cb(err)
  }
}
