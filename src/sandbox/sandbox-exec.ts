// Runs one short program inside a running sandbox with `docker exec` (the workspace file
// program): as the sandbox user, without privileges, its stdin and stdout as raw byte streams
// with backpressure, independent of the REPL and its channel. Sandbox code can stop such a program
// (SIGSTOP: it runs as the same user), so every wait on it may have a deadline (`stallMs`).
import type Docker from 'dockerode'
import { Readable, type Duplex } from 'node:stream'
import { DockerDemuxer } from './demux.js'
import { TimeoutError, withTimeout } from '../retry.js'

/** The sandbox's container is gone or stopped (Docker answered 404 or 409). */
export class SandboxNotRunningError extends Error {
  override name = 'SandboxNotRunningError'
}

/** A write to the program failed: its connection closed (the program ended, stalled, or was let go). */
export class SandboxInputClosedError extends Error {
  override name = 'SandboxInputClosedError'
}

export interface ExecOptions {
  cmd: string[]
  /** uid:gid; never root (the container's no-new-privileges and dropped capabilities apply too). */
  user: string
  workdir: string
  /** Bounds the create and start calls (not the program's run). */
  timeoutMs: number
  /**
   * The longest a wait on the program may go without progress: a write it does not take, or output
   * awaited (awaitOutput) that does not come while it is read. Past it the connection is closed and
   * `stalled` is set. Without it nothing is bounded.
   */
  stallMs?: number
  /** Closes the connection at once when it aborts (the client went away); `aborted` is set. */
  signal?: AbortSignal
}

const STDERR_KEEP_BYTES = 8192

export class SandboxProcess {
  /** The program's stdout; reading it slowly slows the connection down (no buffering without bound). */
  readonly stdout: Readable
  /** Resolves once the connection closed (the program ended, or destroy()). */
  readonly closed: Promise<void>
  readonly stallMs: number | undefined
  private stderrText = ''
  private isClosed = false
  private letGo = false
  private peerEnded = false
  private isStalled = false
  private isAborted = false
  /** Output is awaited (the default: a program's first answer is). */
  private awaiting = true
  /** stdout's reader has not taken what came: the connection is paused, and a quiet program is not stalled. */
  private backedUp = false
  private timer: NodeJS.Timeout | undefined

  constructor(
    private readonly socket: Duplex,
    opts: { stallMs?: number; signal?: AbortSignal } = {},
  ) {
    this.stallMs = opts.stallMs
    this.stdout = new Readable({
      read: () => {
        if (this.backedUp) {
          this.backedUp = false
          this.watch()
        }
        socket.resume()
      },
    })
    const demux = new DockerDemuxer(
      (b) => {
        // A view into the socket's chunk, not a copy (each chunk is a buffer of its own).
        if (this.stdout.push(b)) return
        this.backedUp = true
        socket.pause()
      },
      (b) => {
        if (this.stderrText.length < STDERR_KEEP_BYTES) this.stderrText += b.toString('utf8').slice(0, STDERR_KEEP_BYTES)
      },
      (reason) => socket.destroy(new Error(reason)),
    )
    socket.on('data', (chunk: Buffer) => {
      demux.push(chunk)
      this.watch()
    })
    const onAbort = () => {
      if (this.isClosed) return
      this.isAborted = true
      this.destroy()
    }
    this.closed = new Promise((resolve) => {
      const finish = () => {
        if (this.isClosed) return
        this.isClosed = true
        clearTimeout(this.timer)
        opts.signal?.removeEventListener('abort', onAbort)
        this.stdout.push(null)
        resolve()
      }
      socket.on('end', () => {
        if (!this.letGo) this.peerEnded = true
        finish()
      })
      socket.on('close', finish)
      socket.on('error', finish)
    })
    if (opts.signal?.aborted) onAbort()
    else opts.signal?.addEventListener('abort', onAbort, { once: true })
    this.watch()
  }

  /** What the program wrote to stderr (its first few KiB), for logs. */
  get stderr(): string {
    return this.stderrText
  }

  /** The connection was closed because a wait went `stallMs` without progress. */
  get stalled(): boolean {
    return this.isStalled
  }

  /** The connection was closed because the signal aborted. */
  get aborted(): boolean {
    return this.isAborted
  }

  /** The program ended and Docker closed its exec (not destroy(), a deadline or the signal). */
  get exited(): boolean {
    return this.peerEnded
  }

  /**
   * Whether output is awaited: while it is, and read, `stallMs` without any closes the connection as
   * stalled. Off while the program rightly says nothing (it takes an upload's bytes).
   */
  awaitOutput(on: boolean): void {
    this.awaiting = on
    this.watch()
  }

  /**
   * Writes to the program's stdin; resolves once the connection took it. Throws SandboxInputClosedError
   * once the connection closed, or when it takes nothing for `stallMs` (then it is closed, as stalled).
   */
  async write(chunk: Buffer): Promise<void> {
    if (this.isClosed || this.socket.destroyed) throw new SandboxInputClosedError('the sandbox program has ended')
    if (this.socket.write(chunk)) return
    await new Promise<void>((resolve, reject) => {
      const timer = this.stallMs === undefined ? undefined : setTimeout(() => this.stall(), this.stallMs)
      const done = (err?: Error) => {
        clearTimeout(timer)
        this.socket.off('drain', onDrain)
        this.socket.off('close', onClose)
        this.socket.off('end', onClose)
        if (err) reject(err)
        else resolve()
      }
      const onDrain = () => done()
      // The program's end ('end': its output is over) means nothing reads its stdin any more either.
      const onClose = () =>
        done(new SandboxInputClosedError(this.isStalled ? `the sandbox program took nothing for ${this.stallMs} ms` : 'the sandbox program has ended'))
      this.socket.on('drain', onDrain)
      this.socket.on('close', onClose)
      this.socket.on('end', onClose)
    })
  }

  /**
   * Ends the program's stdin. Docker keeps an exec's stream open while its stdin is, even after the
   * program exited: a program that reads nothing, or read all it needs, gets this at once.
   */
  endInput(): void {
    if (!this.socket.destroyed) this.socket.end()
  }

  /**
   * Ends the program's stdin, drops any output no one reads, and resolves true once the program
   * ended by itself (`exited`), false when it has not within `ms` or the connection was closed here.
   */
  async endsWithin(ms: number): Promise<boolean> {
    this.endInput()
    this.stdout.resume()
    let timer: NodeJS.Timeout | undefined
    await Promise.race([this.closed, new Promise((resolve) => (timer = setTimeout(resolve, ms)))])
    clearTimeout(timer)
    return this.peerEnded
  }

  /** Closes the connection: the program sees EOF on stdin and a closed stdout (if it runs: a stopped one holds its exec). */
  destroy(): void {
    this.letGo = true
    this.socket.destroy()
  }

  private stall(): void {
    if (this.isClosed) return
    this.isStalled = true
    this.destroy()
  }

  /** (Re)starts the stall deadline while output is awaited and read; progress starts it again. */
  private watch(): void {
    if (this.stallMs === undefined || !this.awaiting || this.backedUp || this.isClosed) {
      clearTimeout(this.timer)
      this.timer = undefined
    } else if (this.timer) this.timer.refresh()
    else this.timer = setTimeout(() => this.stall(), this.stallMs)
  }
}

/** Starts `cmd` in the container. Throws SandboxNotRunningError, TimeoutError, or the engine's error. */
export async function startInSandbox(docker: Docker, containerId: string, opts: ExecOptions): Promise<SandboxProcess> {
  const container = docker.getContainer(containerId)
  const exec = await bounded(opts.timeoutMs, 'exec create', (abortSignal) =>
    container.exec({
      Cmd: opts.cmd,
      User: opts.user,
      WorkingDir: opts.workdir,
      Privileged: false,
      Tty: false,
      AttachStdin: true,
      AttachStdout: true,
      AttachStderr: true,
      abortSignal,
    }),
  )
  const socket: Duplex = await bounded(opts.timeoutMs, 'exec start', (abortSignal) => exec.start({ hijack: true, stdin: true, abortSignal }))
  return new SandboxProcess(socket, { stallMs: opts.stallMs, signal: opts.signal })
}

/** One engine call bounded by `ms`: 404 or 409 become SandboxNotRunningError, a deadline TimeoutError. */
export async function bounded<T>(ms: number, what: string, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const ac = new AbortController()
  const timer = setTimeout(() => ac.abort(), ms)
  try {
    return await withTimeout(fn(ac.signal), ms + 100, `docker ${what}`)
  } catch (err) {
    const status = (err as { statusCode?: number }).statusCode
    if (status === 404 || status === 409) throw new SandboxNotRunningError(`the sandbox is not running (${what}: ${status})`, { cause: err })
    if (ac.signal.aborted) throw new TimeoutError(`docker ${what} did not answer within ${ms} ms`, { cause: err })
    throw err
  } finally {
    clearTimeout(timer)
  }
}

/** Reads one line (without its newline) from the start of `stream`, leaving the rest unread. Null when it ends first. */
export async function readLine(stream: Readable, maxBytes: number): Promise<string | null> {
  const parts: Buffer[] = []
  let size = 0
  for (;;) {
    const chunk = stream.read() as Buffer | null
    if (chunk === null) {
      if (stream.readableEnded) return null
      await new Promise<void>((resolve) => {
        const go = () => {
          stream.off('readable', go)
          stream.off('end', go)
          resolve()
        }
        stream.on('readable', go)
        stream.on('end', go)
      })
      continue
    }
    const nl = chunk.indexOf(0x0a)
    if (nl >= 0) {
      parts.push(chunk.subarray(0, nl))
      if (nl + 1 < chunk.length) stream.unshift(chunk.subarray(nl + 1))
      return Buffer.concat(parts).toString('utf8')
    }
    parts.push(chunk)
    size += chunk.length
    if (size > maxBytes) throw new Error(`a line of more than ${maxBytes} bytes from the sandbox`)
  }
}
