// The host's side of the sandbox's workspace file program (sandbox-image/replcast_repl/fileio.py),
// one `docker exec` per operation: raw bytes both ways (puts in length-prefixed frames ending with
// a commit frame, so a cut-off upload is never committed), paths checked inside the container.
// Sandbox code can stop the program (it runs as the same user): every wait on it has a deadline,
// and a program let go before it ended is killed, or its Docker exec would live as long as it does.
import type Docker from 'dockerode'
import { randomBytes } from 'node:crypto'
import { Readable } from 'node:stream'
import type { Logger } from 'pino'
import { readLine, SandboxInputClosedError, SandboxNotRunningError, startInSandbox, type SandboxProcess } from './sandbox-exec.js'

const PROGRAM = ['/usr/bin/python3', '-I', '-S', '/opt/replcast/replcast_repl/fileio.py']
const WORKSPACE = '/workspace'
/** A listing of 10,000 entries is about 1.5 MB of JSON. */
const MAX_HEADER_BYTES = 8 * 1024 * 1024
/** An upload goes in frames of at most this: each is one wait on the program, with its deadline. */
const MAX_FRAME_BYTES = 1024 * 1024
const COMMIT = Buffer.alloc(4)

/** What the program said went wrong: invalid_path, not_found, is_a_directory, no_space, too_large, permission_denied, aborted, io_error. */
export class WorkspaceFileError extends Error {
  override name = 'WorkspaceFileError'
  constructor(
    readonly code: string,
    message: string,
    /** too_large of a download: the file's size in bytes. */
    readonly size?: number,
  ) {
    super(message)
  }
}

export interface WorkspaceEntry {
  /** Relative to /workspace, where it really is (symlinks inside the workspace resolved). */
  path: string
  type: 'file' | 'dir'
  size: number
  /** Unix seconds. */
  mtime: number
}

export interface PutResult extends WorkspaceEntry {
  created: boolean
}

export interface WorkspaceFilesOptions {
  docker: Docker
  user: string
  /** Bounds each Docker engine call (an exec's create and start). */
  timeoutMs: number
  /** The longest any wait on the program may go without progress (its answers, each write, each read of a download). */
  stallMs: number
  /** Told when a program let go could not be killed. */
  log?: Pick<Logger, 'warn'>
}

/** Aborts (the client went away) close the program's connection at once. */
export interface CallOptions {
  signal?: AbortSignal
}

/** One run of the program: its connection, and the tag in its arguments that finds it to kill it. */
interface Run {
  p: SandboxProcess
  containerId: string
  tag: string
}

export class WorkspaceFiles {
  constructor(private readonly opts: WorkspaceFilesOptions) {}

  /**
   * Streams `body` into the file at `path` (parents created) and commits it only when the body
   * ended whole; past `maxBytes` it stops with too_large. Throws WorkspaceFileError (no_answer past
   * a deadline, aborted when the body failed or the signal aborted), or the exec's errors.
   */
  async put(
    containerId: string,
    path: string,
    body: AsyncIterable<Buffer | string> | Iterable<Buffer>,
    opts: CallOptions & { maxBytes: number; mode?: number },
  ): Promise<PutResult> {
    const run = await this.start(containerId, { op: 'put', path, max_bytes: opts.maxBytes, mode: opts.mode ?? null }, opts.signal)
    const { p } = run
    try {
      const ready = await header(p)
      if (!ready.ready) throw new WorkspaceFileError('io_error', 'the file program did not get ready')
      // The program says nothing while it takes the bytes (the writes have their own deadline), unless
      // it stops early (workspace full): its answer then says why, not the write that failed.
      p.awaitOutput(false)
      const answer = header(p)
      answer.catch(() => undefined)
      try {
        await send(p, body, opts.maxBytes, path)
      } catch (err) {
        if (!(err instanceof SandboxInputClosedError)) throw err
        throw cutShort(p) ?? (await settledWithin(answer, 1000)) ?? err
      }
      p.awaitOutput(true)
      return (await answer) as unknown as PutResult
    } finally {
      this.release(run, true)
    }
  }

  /**
   * The file's entry and its bytes; the stream errors when the file shrank under it, or the sandbox
   * stopped sending (a deadline). Throws WorkspaceFileError: too_large past `maxBytes` (nothing sent).
   */
  async get(containerId: string, path: string, opts: CallOptions & { maxBytes: number }): Promise<{ entry: WorkspaceEntry; body: Readable }> {
    const run = await this.start(containerId, { op: 'get', path, max_bytes: opts.maxBytes }, opts.signal)
    let entry: WorkspaceEntry
    try {
      entry = (await header(run.p)) as unknown as WorkspaceEntry
    } catch (err) {
      this.release(run, true)
      throw err
    }
    if (entry.size > opts.maxBytes) {
      // A program from an older image does not know max_bytes: it has begun to send them.
      this.release(run, false)
      throw new WorkspaceFileError('too_large', `${entry.path}: ${entry.size} bytes, more than ${opts.maxBytes}`, entry.size)
    }
    const body = exactly(run.p, entry.size)
    body.on('close', () => this.release(run, body.readableEnded))
    return { entry, body }
  }

  /** When the container last started (ms), or null when it is not running (or gone). */
  async startedAt(containerId: string): Promise<number | null> {
    const info = await this.opts.docker
      .getContainer(containerId)
      .inspect({ abortSignal: AbortSignal.timeout(this.opts.timeoutMs) })
      .catch((err: unknown) => {
        if ((err as { statusCode?: number }).statusCode === 404) return null
        throw err
      })
    return info?.State.Running ? Date.parse(info.State.StartedAt) : null
  }

  async list(containerId: string, path: string, recursive: boolean, opts: CallOptions = {}): Promise<{ entries: WorkspaceEntry[]; truncated: boolean }> {
    return (await this.once(containerId, { op: 'list', path, recursive }, opts.signal)) as unknown as { entries: WorkspaceEntry[]; truncated: boolean }
  }

  async delete(containerId: string, path: string, recursive: boolean, opts: CallOptions = {}): Promise<void> {
    await this.once(containerId, { op: 'delete', path, recursive }, opts.signal)
  }

  private async once(containerId: string, args: Record<string, unknown>, signal?: AbortSignal): Promise<Record<string, unknown>> {
    const run = await this.start(containerId, args, signal)
    try {
      return await header(run.p)
    } finally {
      this.release(run, true)
    }
  }

  private async start(containerId: string, args: Record<string, unknown>, signal?: AbortSignal): Promise<Run> {
    const tag = randomBytes(8).toString('hex')
    const p = await startInSandbox(this.opts.docker, containerId, {
      cmd: [...PROGRAM, JSON.stringify({ ...args, tag })],
      user: this.opts.user,
      workdir: WORKSPACE,
      timeoutMs: this.opts.timeoutMs,
      stallMs: this.opts.stallMs,
      signal,
    })
    // Only an upload reads stdin; without it the stream would outlive the program (sandbox-exec.ts).
    if (args.op !== 'put') p.endInput()
    return { p, containerId, tag }
  }

  /**
   * Lets the program go once its call is over, in the background. One that ended is done with. One
   * that has said all it will (`ending`) is given `stallMs` to end; any other, and one that does not
   * end, has its connection closed and is killed: sandbox code may have stopped it (SIGSTOP), and a
   * stopped program keeps its Docker exec, whatever becomes of the connection, for as long as it lives.
   */
  private release(run: Run, ending: boolean): void {
    const { p, containerId, tag } = run
    void (async () => {
      if (ending && (await p.endsWithin(this.opts.stallMs))) return
      if (p.exited) return
      p.destroy()
      await this.kill(containerId, tag)
    })().catch((err: unknown) => {
      if (!(err instanceof SandboxNotRunningError)) this.opts.log?.warn({ err, containerId }, 'a workspace file program could not be ended')
    })
  }

  /** Kills the program whose arguments carry `tag`, with the program's kill operation beside it (as the same user). */
  private async kill(containerId: string, tag: string): Promise<void> {
    const { p } = await this.start(containerId, { op: 'kill', target: tag })
    try {
      await header(p)
    } finally {
      // It too may be stopped by sandbox code: then it is let go, and its exec lives as long as the sandbox.
      if (!(await p.endsWithin(this.opts.stallMs))) p.destroy()
    }
  }
}

/** Writes `body` to the program in frames, then the commit frame. Throws too_large, aborted (the body failed), SandboxInputClosedError. */
async function send(p: SandboxProcess, body: AsyncIterable<Buffer | string> | Iterable<Buffer>, maxBytes: number, path: string): Promise<void> {
  let size = 0
  try {
    for await (const part of body) {
      const chunk = typeof part === 'string' ? Buffer.from(part) : part
      size += chunk.length
      if (size > maxBytes) throw new WorkspaceFileError('too_large', `${path}: larger than ${maxBytes} bytes`)
      for (let at = 0; at < chunk.length; at += MAX_FRAME_BYTES) {
        const piece = chunk.subarray(at, at + MAX_FRAME_BYTES)
        const frame = Buffer.allocUnsafe(4)
        frame.writeUInt32BE(piece.length)
        await p.write(frame)
        await p.write(piece)
      }
    }
  } catch (err) {
    if (err instanceof WorkspaceFileError || err instanceof SandboxInputClosedError) throw err
    throw new WorkspaceFileError('aborted', `the upload was cut off: ${(err as Error).message}`)
  }
  await p.write(COMMIT)
  p.endInput()
}

/** Why the program's connection was closed before its call was over, when it was closed here: a deadline, or the signal. */
function cutShort(p: SandboxProcess): WorkspaceFileError | null {
  if (p.stalled) return new WorkspaceFileError('no_answer', `the sandbox made no progress with the file operation within ${p.stallMs} ms`)
  if (p.aborted) return new WorkspaceFileError('aborted', 'the client went away before the file operation was over')
  return null
}

/**
 * The program's next JSON line; a failure it reports becomes WorkspaceFileError. Awaited output has
 * the process's deadline (a sandbox starved of memory or CPU, a program sandbox code stopped, an engine
 * that never delivers the output must not hold a request forever): past it this throws no_answer.
 */
async function header(p: SandboxProcess): Promise<Record<string, unknown>> {
  const line = await readLine(p.stdout, MAX_HEADER_BYTES)
  if (line === null) {
    await p.closed
    throw cutShort(p) ?? new WorkspaceFileError('io_error', `the file program ended without an answer${p.stderr ? `: ${p.stderr.slice(-500)}` : ''}`)
  }
  let msg: Record<string, unknown>
  try {
    msg = JSON.parse(line) as Record<string, unknown>
  } catch {
    throw new WorkspaceFileError('io_error', 'the file program answered something that is not JSON')
  }
  if (msg.ok === false)
    throw new WorkspaceFileError(
      typeof msg.code === 'string' ? msg.code : 'io_error',
      typeof msg.message === 'string' ? msg.message : 'the file operation failed',
      typeof msg.size === 'number' ? msg.size : undefined,
    )
  return msg
}

/** The error `p` rejects with within `ms`, if it does. */
async function settledWithin(p: Promise<unknown>, ms: number): Promise<Error | null> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<null>((resolve) => {
    timer = setTimeout(() => resolve(null), ms)
  })
  try {
    return await Promise.race([
      p.then(
        () => null,
        (err: unknown) => (err instanceof Error ? err : new Error(String(err))),
      ),
      late,
    ])
  } finally {
    clearTimeout(timer)
  }
}

/**
 * The first `size` bytes of the program's output, ending as soon as they have passed (not when the
 * exec stream ends, which Docker may hold open); fewer before it ends is an error (the response is
 * cut short): the file shrank, or the sandbox sent nothing for `stallMs` while they were read.
 */
function exactly(p: SandboxProcess, size: number): Readable {
  const source = p.stdout
  let left = size
  const out = new Readable({ read: () => void source.resume() })
  const onData = (chunk: Buffer) => {
    const part = chunk.length > left ? chunk.subarray(0, left) : chunk
    left -= part.length
    if (!out.push(part)) source.pause()
    if (left === 0) finish()
  }
  const finish = () => {
    source.off('data', onData)
    out.push(null)
  }
  if (size === 0) finish()
  else source.on('data', onData)
  source.on('end', () => {
    if (left > 0) out.destroy(new Error(`${cutShort(p)?.message ?? 'the file changed while it was read'}: it ended ${left} bytes early`))
  })
  source.on('error', (err) => out.destroy(err))
  return out
}
