// The host's side of the sandbox's workspace file program (sandbox-image/replcast_repl/fileio.py),
// one `docker exec` per operation: raw bytes both ways (puts in length-prefixed frames ending with
// a commit frame, so a cut-off upload is never committed), paths checked inside the container.
import type Docker from 'dockerode'
import { Readable } from 'node:stream'
import { readLine, startInSandbox, type SandboxProcess } from './sandbox-exec.js'

const PROGRAM = ['/usr/bin/python3', '-I', '-S', '/opt/replcast/replcast_repl/fileio.py']
const WORKSPACE = '/workspace'
/** A listing of 10,000 entries is about 1.5 MB of JSON. */
const MAX_HEADER_BYTES = 8 * 1024 * 1024
const COMMIT = Buffer.alloc(4)

/** What the program said went wrong: invalid_path, not_found, is_a_directory, no_space, too_large, permission_denied, aborted, io_error. */
export class WorkspaceFileError extends Error {
  override name = 'WorkspaceFileError'
  constructor(
    readonly code: string,
    message: string,
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
  timeoutMs: number
}

export class WorkspaceFiles {
  constructor(private readonly opts: WorkspaceFilesOptions) {}

  /**
   * Streams `body` into the file at `path` (parents created) and commits it only when the body
   * ended whole; past `maxBytes` it stops with too_large. Throws WorkspaceFileError, or the exec's errors.
   */
  async put(
    containerId: string,
    path: string,
    body: AsyncIterable<Buffer | string> | Iterable<Buffer>,
    opts: { maxBytes: number; mode?: number },
  ): Promise<PutResult> {
    const p = await this.start(containerId, { op: 'put', path, max_bytes: opts.maxBytes, mode: opts.mode ?? null })
    try {
      const ready = await header(p, this.opts.timeoutMs)
      if (!ready.ready) throw new WorkspaceFileError('io_error', 'the file program did not get ready')
      // The program may stop early (workspace full): its answer then says why, not the write that failed.
      const answer = header(p)
      answer.catch(() => undefined)
      let size = 0
      try {
        for await (const part of body) {
          const chunk = typeof part === 'string' ? Buffer.from(part) : part
          if (!chunk.length) continue
          size += chunk.length
          if (size > opts.maxBytes) throw new WorkspaceFileError('too_large', `${path}: larger than ${opts.maxBytes} bytes`)
          const frame = Buffer.allocUnsafe(4)
          frame.writeUInt32BE(chunk.length)
          await p.write(frame)
          await p.write(chunk)
        }
        await p.write(COMMIT)
        p.endInput()
      } catch (err) {
        if (err instanceof WorkspaceFileError) throw err
        const early = await settledWithin(answer, 1000)
        if (early) throw early
        throw err
      }
      return (await answer) as unknown as PutResult
    } finally {
      p.destroy()
    }
  }

  /** The file's entry and its bytes; the stream errors when the file shrank under it. Throws WorkspaceFileError. */
  async get(containerId: string, path: string): Promise<{ entry: WorkspaceEntry; body: Readable }> {
    const p = await this.start(containerId, { op: 'get', path })
    let entry: WorkspaceEntry
    try {
      entry = (await header(p, this.opts.timeoutMs)) as unknown as WorkspaceEntry
    } catch (err) {
      p.destroy()
      throw err
    }
    const body = exactly(p.stdout, entry.size)
    body.on('close', () => p.destroy())
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

  async list(containerId: string, path: string, recursive: boolean): Promise<{ entries: WorkspaceEntry[]; truncated: boolean }> {
    return (await this.once(containerId, { op: 'list', path, recursive })) as unknown as { entries: WorkspaceEntry[]; truncated: boolean }
  }

  async delete(containerId: string, path: string, recursive: boolean): Promise<void> {
    await this.once(containerId, { op: 'delete', path, recursive })
  }

  private async once(containerId: string, args: Record<string, unknown>): Promise<Record<string, unknown>> {
    const p = await this.start(containerId, args)
    try {
      return await header(p, this.opts.timeoutMs)
    } finally {
      p.destroy()
    }
  }

  private async start(containerId: string, args: Record<string, unknown>): Promise<SandboxProcess> {
    const p = await startInSandbox(this.opts.docker, containerId, {
      cmd: [...PROGRAM, JSON.stringify(args)],
      user: this.opts.user,
      workdir: WORKSPACE,
      timeoutMs: this.opts.timeoutMs,
    })
    // Only an upload reads stdin; without it the stream would outlive the program (sandbox-exec.ts).
    if (args.op !== 'put') p.endInput()
    return p
  }
}

/**
 * The program's next JSON line; a failure it reports becomes WorkspaceFileError. `withinMs`: an answer
 * the program gives at once must come within it, else the program is ended and this throws (a sandbox
 * starved of memory or CPU, or an engine that never delivers the output, must not hold a request forever).
 */
async function header(p: SandboxProcess, withinMs?: number): Promise<Record<string, unknown>> {
  let late = false
  const timer =
    withinMs === undefined
      ? undefined
      : setTimeout(() => {
          late = true
          p.destroy()
        }, withinMs)
  let line: string | null
  try {
    line = await readLine(p.stdout, MAX_HEADER_BYTES)
  } finally {
    clearTimeout(timer)
  }
  if (line === null) {
    await p.closed
    if (late) throw new WorkspaceFileError('no_answer', `the sandbox did not answer the file operation within ${withinMs} ms`)
    throw new WorkspaceFileError('io_error', `the file program ended without an answer${p.stderr ? `: ${p.stderr.slice(-500)}` : ''}`)
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
 * The first `size` bytes of `source`, ending as soon as they have passed (not when the exec stream
 * ends, which Docker may hold open); fewer before the source ends is an error (the response is cut short).
 */
function exactly(source: Readable, size: number): Readable {
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
    if (left > 0) out.destroy(new Error(`the file ended ${left} bytes early (it changed while it was read)`))
  })
  source.on('error', (err) => out.destroy(err))
  return out
}
