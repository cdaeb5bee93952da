// A terminal in a running sandbox: an interactive bash in a pseudo-terminal (`docker exec` with a
// Tty) as the sandbox's user in /workspace. An exec joins the container's namespaces, cgroup and
// limits and keeps its dropped capabilities and no-new-privileges, so the shell has exactly what the
// session's code has. Docker keeps such a shell running after its connection closes, so closing a
// terminal also kills what it started, found by the tag in its environment (terminal.py in the image).
import type Docker from 'dockerode'
import { randomBytes } from 'node:crypto'
import type { Duplex, Readable, Writable } from 'node:stream'
import type { Logger } from 'pino'
import { bounded, SandboxNotRunningError, startInSandbox } from './sandbox-exec.js'

const SHELL = ['/bin/bash', '-i']
const KILL_PROGRAM = ['/usr/bin/python3', '-I', '-S', '/opt/replcast/replcast_repl/terminal.py', 'kill']
const WORKSPACE = '/workspace'
/** The environment variable whose value tags a terminal's processes (terminal.py kills by it). */
const TERMINAL_TAG_VAR = 'REPLCAST_TERMINAL'

export interface TerminalSize {
  cols: number
  rows: number
}

export interface TerminalOptions extends TerminalSize {
  /** uid:gid; never root. */
  user: string
  /** Bounds each engine call (create, start, resize, inspect) and the kill's run. */
  timeoutMs: number
  log: Pick<Logger, 'warn'>
}

/**
 * How a terminal ended: its shell exited by itself (`exitCode`, null when the engine could not say),
 * the connection to it was lost otherwise (an engine restart, a broken socket), or close() was called.
 */
export type TerminalEnd = { by: 'exit'; exitCode: number | null } | { by: 'lost' } | { by: 'close' }

export class SandboxTerminal {
  /** What the shell writes (the pseudo-terminal's bytes as they are); pausing it blocks the shell's writes once the terminal's buffer is full. */
  readonly output: Readable
  /** Keystrokes to the shell; write() returning false means wait for its 'drain'. */
  readonly input: Writable
  /** Resolves once the shell's connection is over (never rejects). */
  readonly ended: Promise<TerminalEnd>
  private closing: Promise<void> | null = null
  private resizing = false
  private wanted: TerminalSize | null = null

  constructor(
    private readonly docker: Docker,
    private readonly containerId: string,
    private readonly exec: Docker.Exec,
    socket: Duplex,
    private readonly tag: string,
    private readonly opts: TerminalOptions,
  ) {
    this.output = socket
    this.input = socket
    this.ended = new Promise((resolve) => {
      let peerEnded = false
      socket.once('end', () => (peerEnded = true))
      socket.on('error', () => undefined)
      socket.once('close', () => {
        // Docker ends the connection when the shell exits; one closed here was closed on purpose.
        if (this.closing) return resolve({ by: 'close' })
        if (!peerEnded) return resolve({ by: 'lost' })
        void this.exitCode().then((exitCode) => resolve({ by: 'exit', exitCode }))
      })
    })
  }

  /**
   * Sets the pseudo-terminal's size (the shell gets SIGWINCH). Calls do not pile up: while one is
   * with the engine, only the latest size asked for meanwhile is sent after it.
   */
  resize(size: TerminalSize): void {
    this.wanted = size
    if (this.resizing || this.closing) return
    this.resizing = true
    void (async () => {
      while (this.wanted && !this.closing) {
        const { cols, rows } = this.wanted
        this.wanted = null
        await bounded(this.opts.timeoutMs, 'exec resize', (abortSignal) => this.exec.resize({ h: rows, w: cols, abortSignal })).catch((err: unknown) => {
          if (!(err instanceof SandboxNotRunningError)) this.opts.log.warn({ err, containerId: this.containerId }, 'could not resize a terminal')
        })
      }
      this.resizing = false
    })()
  }

  /**
   * Ends the shell and everything it started: the connection closes, then the terminal program kills
   * the tagged processes (bounded by the timeout; a sandbox that is gone has nothing left to kill).
   * Safe to call twice; resolves once the kill has run.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.output.destroy()
      await killTagged(this.docker, this.containerId, this.tag, this.opts)
    })()
    return this.closing
  }

  private async exitCode(): Promise<number | null> {
    try {
      const info = await bounded(this.opts.timeoutMs, 'exec inspect', (abortSignal) => this.exec.inspect({ abortSignal }))
      return typeof info.ExitCode === 'number' ? info.ExitCode : null
    } catch {
      return null
    }
  }
}

/** Starts a terminal in the container. Throws SandboxNotRunningError, TimeoutError, or the engine's error. */
export async function openTerminal(docker: Docker, containerId: string, opts: TerminalOptions): Promise<SandboxTerminal> {
  const tag = randomBytes(8).toString('hex')
  const exec = await bounded(opts.timeoutMs, 'exec create', (abortSignal) =>
    docker.getContainer(containerId).exec({
      Cmd: SHELL,
      User: opts.user,
      WorkingDir: WORKSPACE,
      Env: ['TERM=xterm-256color', `${TERMINAL_TAG_VAR}=${tag}`],
      Privileged: false,
      Tty: true,
      AttachStdin: true,
      AttachStdout: true,
      AttachStderr: true,
      abortSignal,
    }),
  )
  // ConsoleSize sizes the terminal from the start where the engine knows it (API 1.42); the resize
  // right after the start does it on older engines, before anything is typed: the first command sees
  // the size asked for.
  const size = [opts.rows, opts.cols]
  let socket: Duplex | null = null
  try {
    socket = await bounded(opts.timeoutMs, 'exec start', (abortSignal) =>
      exec.start({ hijack: true, stdin: true, Tty: true, ConsoleSize: size, abortSignal } as Docker.ExecStartOptions),
    )
    await bounded(opts.timeoutMs, 'exec resize', (abortSignal) => exec.resize({ h: opts.rows, w: opts.cols, abortSignal }))
  } catch (err) {
    // The shell may have started (a start that timed out may still have run): it goes.
    socket?.destroy()
    await killTagged(docker, containerId, tag, opts)
    throw err
  }
  return new SandboxTerminal(docker, containerId, exec, socket, tag, opts)
}

/** Kills the processes of the terminal tagged `tag` (terminal.py), bounded by the timeout; a sandbox that is gone has none left. */
async function killTagged(docker: Docker, containerId: string, tag: string, opts: TerminalOptions): Promise<void> {
  try {
    const p = await startInSandbox(docker, containerId, { cmd: [...KILL_PROGRAM, tag], user: opts.user, workdir: WORKSPACE, timeoutMs: opts.timeoutMs })
    if (!(await p.endsWithin(opts.timeoutMs))) {
      p.destroy()
      opts.log.warn({ containerId }, "a terminal's processes may be left: its kill did not end in time")
    }
  } catch (err) {
    if (!(err instanceof SandboxNotRunningError)) opts.log.warn({ err, containerId }, "could not kill a terminal's processes")
  }
}
