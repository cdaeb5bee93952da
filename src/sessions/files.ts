// A session's workspace files, for the HTTP routes and one-shot executions: only the tenant's own
// live sessions, paths checked before anything runs, the idle deadline moved, and the sandbox file
// program's answers turned into the API's errors. Files move by `docker exec` (sandbox/workspace-files.ts),
// not over the REPL: they work on any instance, while code runs, and whatever state the REPL is in.
import type { Readable } from 'node:stream'
import type { Logger } from 'pino'
import type { Config } from '../config.js'
import { AppError } from '../errors.js'
import { SandboxNotRunningError } from '../sandbox/sandbox-exec.js'
import type { SandboxFiles } from '../sandbox/driver.js'
import { WorkspaceFileError, type WorkspaceEntry } from '../sandbox/workspace-files.js'
import type { SessionRecord } from '../store/records.js'
import type { Stores } from '../store/stores.js'
import type { Engines } from './supply/index.js'
import type { SessionService } from './session-service.js'
import { recordActivity } from './activity.js'

const MIB = 1024 * 1024
const MAX_PATH_BYTES = 4096
const MAX_NAME_BYTES = 255

/** A workspace entry as the API shows it. */
export interface FileEntry {
  path: string
  type: 'file' | 'dir'
  size: number
  modified_at: string
}

export interface FilesDeps {
  config: Config
  stores: Pick<Stores, 'sessions'>
  sessions: Pick<SessionService, 'record' | 'usable' | 'settled'>
  files: SandboxFiles
  log: Logger
  /** Files move only on the session's own engine: elsewhere the request must go to an instance there. */
  engines?: Pick<Engines, 'mustBeHere'>
}

/**
 * A path as given (already percent-decoded), checked and normalised: '' and '.' names dropped.
 * Throws invalid_path for an absolute path, `..`, NUL, or names the file system cannot hold.
 * The sandbox checks again, symlinks included: this check only saves starting it for nothing.
 */
export function workspacePath(path: string): string {
  const bad = (why: string) => new AppError('invalid_path', `${JSON.stringify(path.slice(0, 200))}: ${why}`)
  if (path.includes('\0')) throw bad('a NUL byte is not allowed')
  if (path.startsWith('/')) throw bad('absolute paths are not allowed; paths are relative to /workspace')
  if (Buffer.byteLength(path) > MAX_PATH_BYTES) throw bad(`longer than ${MAX_PATH_BYTES} bytes`)
  const names = path.split('/').filter((n) => n !== '' && n !== '.')
  if (names.includes('..')) throw bad("'..' is not allowed")
  if (names.some((n) => Buffer.byteLength(n) > MAX_NAME_BYTES)) throw bad(`a name is longer than ${MAX_NAME_BYTES} bytes`)
  return names.join('/')
}

export class SessionFiles {
  constructor(private readonly deps: FilesDeps) {}

  /**
   * Writes `body` to the file (parents created), whole or not at all. `contentLength`, when known,
   * is refused at once if it cannot fit. Throws invalid_path, is_a_directory, workspace_full,
   * payload_too_large, permission_denied, session_not_found, session_dead, sandbox_failed, unavailable.
   * `signal`: the caller went away (the sandbox's program is let go at once).
   */
  async put(
    tenant: string,
    sid: string,
    path: string,
    body: AsyncIterable<Buffer | string> | Iterable<Buffer>,
    opts: { contentLength?: number; mode?: number; signal?: AbortSignal } = {},
  ): Promise<{ entry: FileEntry; created: boolean }> {
    const rel = workspacePath(path)
    const rec = await this.live(tenant, sid)
    return this.putInto(rec, rel, body, opts)
  }

  /**
   * The file's entry, content type and bytes. A file larger than one may be (maxFileBytes, or
   * `opts.maxBytes` when smaller) is refused from its size before its bytes move: a sparse file may
   * claim far more than the workspace holds. Throws invalid_path, file_not_found, is_a_directory,
   * file_too_large, and the session's errors; the bytes stop, cut short, when the sandbox stops sending.
   */
  async get(tenant: string, sid: string, path: string, opts: { maxBytes?: number; signal?: AbortSignal } = {}): Promise<{ entry: FileEntry; body: Readable }> {
    const rel = workspacePath(path)
    const rec = await this.live(tenant, sid)
    const maxBytes = Math.min(opts.maxBytes ?? Infinity, this.maxFileBytes(rec))
    const { entry, body } = await this.run(rec, rel, (cid) =>
      this.deps.files.get(cid, rel, { maxBytes, signal: opts.signal }).catch((err: unknown) => {
        if (err instanceof WorkspaceFileError && err.code === 'too_large') throw this.tooLargeToRead(rec, rel, maxBytes, err.size)
        throw err
      }),
    )
    return { entry: toEntry(entry), body }
  }

  /** The folder's files and folders (all below it when recursive), sorted by path. A file path gives that one entry. */
  async list(
    tenant: string,
    sid: string,
    path: string,
    recursive: boolean,
    opts: { signal?: AbortSignal } = {},
  ): Promise<{ files: FileEntry[]; truncated: boolean }> {
    const rel = workspacePath(path)
    const rec = await this.live(tenant, sid)
    const res = await this.run(rec, rel, (cid) => this.deps.files.list(cid, rel, recursive, opts))
    return { files: res.entries.map(toEntry), truncated: res.truncated }
  }

  /** Deletes a file or a symbolic link (never what it points at); a folder only when recursive. */
  async delete(tenant: string, sid: string, path: string, recursive: boolean, opts: { signal?: AbortSignal } = {}): Promise<void> {
    const rel = workspacePath(path)
    const rec = await this.live(tenant, sid)
    await this.run(rec, rel, (cid) => this.deps.files.delete(cid, rel, recursive, opts))
    this.deps.log.info({ sessionId: sid, path: rel, recursive }, 'file deleted')
  }

  /** For one-shot executions: writes a file into a session the caller itself created (no tenant check). Throws like put. */
  async write(sessionId: string, path: string, data: Buffer | AsyncIterable<Buffer>): Promise<void> {
    const rel = workspacePath(path)
    const rec = await this.live(null, sessionId)
    await this.putInto(rec, rel, Buffer.isBuffer(data) ? [data] : data, { contentLength: Buffer.isBuffer(data) ? data.length : undefined })
  }

  private async putInto(
    rec: SessionRecord,
    rel: string,
    body: AsyncIterable<Buffer | string> | Iterable<Buffer>,
    opts: { contentLength?: number; mode?: number; signal?: AbortSignal },
  ): Promise<{ entry: FileEntry; created: boolean }> {
    const maxBytes = this.maxFileBytes(rec)
    if (opts.contentLength !== undefined && opts.contentLength > maxBytes) throw this.tooLarge(rec, rel)
    const t0 = performance.now()
    const res = await this.run(rec, rel, (cid) => this.deps.files.put(cid, rel, body, { maxBytes, mode: opts.mode, signal: opts.signal }))
    this.deps.log.info({ sessionId: rec.id, path: res.path, size: res.size, ms: Math.round(performance.now() - t0) }, 'file written')
    return { entry: toEntry(res), created: res.created }
  }

  /** The most one file may hold: the configured maximum, or the whole workspace. */
  private maxFileBytes(rec: SessionRecord): number {
    return Math.min(this.deps.config.MAX_FILE_BYTES, rec.limits.workspace_mb * MIB)
  }

  /** A file past maxFileBytes: whichever bound it passed. */
  private tooLarge(rec: SessionRecord, rel: string): AppError {
    const max = this.deps.config.MAX_FILE_BYTES
    return max < rec.limits.workspace_mb * MIB
      ? new AppError('payload_too_large', `${rel}: a file may have at most ${max} bytes (MAX_FILE_BYTES)`)
      : this.full(rec, rel)
  }

  /** A download past `maxBytes`: which bound it passed, and the file's size when the program told it. */
  private tooLargeToRead(rec: SessionRecord, rel: string, maxBytes: number, size: number | undefined): AppError {
    const bound =
      maxBytes < this.maxFileBytes(rec)
        ? 'this call'
        : maxBytes === this.deps.config.MAX_FILE_BYTES
          ? 'MAX_FILE_BYTES'
          : `the workspace's size, limits.workspace_mb = ${rec.limits.workspace_mb} MiB`
    return new AppError(
      'file_too_large',
      `${rel}${size === undefined ? '' : ` is ${size} bytes and`} is larger than a download may be: at most ${maxBytes} bytes (${bound})`,
      {
        extra: { ...(size === undefined ? {} : { size }), maximum: maxBytes },
      },
    )
  }

  private full(rec: SessionRecord, rel: string): AppError {
    return new AppError(
      'workspace_full',
      `${rel} does not fit in the workspace (limits.workspace_mb = ${rec.limits.workspace_mb} MiB, shared with what is already there); nothing was changed`,
    )
  }

  /** The tenant's session (any tenant's for null), alive. Throws session_not_found, session_dead. */
  private async live(tenant: string | null, sid: string): Promise<SessionRecord> {
    await this.deps.sessions.settled(sid)
    const rec = tenant === null ? await this.deps.stores.sessions.getSession(sid) : await this.deps.sessions.record(tenant, sid)
    if (!rec) throw new AppError('session_not_found', `no session ${sid}`)
    // A hibernated session's files are in its checkpoint: it wakes first.
    if (rec.status === 'hibernated') return this.live(tenant, (await this.deps.sessions.usable(rec)).id)
    if (rec.status === 'dead' || !rec.container_id)
      throw new AppError('session_dead', rec.status_detail || "the session's sandbox has died; restart it or create a new session")
    await this.deps.engines?.mustBeHere(rec)
    return rec
  }

  /** Runs one file operation against the session's sandbox; its failures become the API's errors. */
  private async run<T>(rec: SessionRecord, rel: string, op: (containerId: string) => Promise<T>): Promise<T> {
    await this.touch(rec)
    const began = Date.now()
    try {
      return await op(rec.container_id)
    } catch (err) {
      throw this.asAppError(rec, rel, err) ?? (await this.whyFailed(rec, rel, err, began))
    } finally {
      await this.touch(rec)
    }
  }

  /** The API error for a failure the file program or Docker explained; null when it is unexplained. */
  private asAppError(rec: SessionRecord, rel: string, err: unknown): AppError | null {
    if (err instanceof AppError) return err
    if (err instanceof SandboxNotRunningError)
      return new AppError('session_dead', "the session's sandbox is not running (it died, or is restarting)", { cause: err })
    if (err instanceof WorkspaceFileError) {
      const detail = err.message
      switch (err.code) {
        case 'invalid_path':
          return new AppError('invalid_path', detail)
        case 'not_found':
          return new AppError('file_not_found', detail)
        case 'is_a_directory':
          return new AppError('is_a_directory', detail)
        case 'no_answer':
          // A sandbox starved of memory or CPU (its own limits): it may answer when it is less busy.
          return new AppError('unavailable', `${detail} (it may be short of memory or CPU); retry`, { headers: { 'retry-after': '1' } })
        case 'no_space':
          return this.full(rec, rel)
        case 'too_large':
          return this.tooLarge(rec, rel)
        case 'permission_denied':
          return new AppError('permission_denied', detail)
        case 'aborted':
          return new AppError('bad_request', `${rel}: the upload ended before it was complete; nothing was changed`)
      }
    }
    return null
  }

  /**
   * An unexplained failure (the program ended without an answer, Docker failed the exec): most often
   * the session was deleted, restarted or killed under the call, which is said as such; else 502.
   */
  private async whyFailed(rec: SessionRecord, rel: string, err: unknown, began: number): Promise<AppError> {
    const now = await this.deps.stores.sessions.getSession(rec.id).catch(() => rec)
    if (!now) return new AppError('session_not_found', `no session ${rec.id} (it was deleted during the file operation)`)
    const started = await this.deps.files.startedAt(rec.container_id).catch(() => undefined)
    if (now.container_id !== rec.container_id || started === null || (started !== undefined && started >= began - 1000))
      return new AppError('session_dead', "the session's sandbox stopped or was restarted during the file operation; nothing was changed", { cause: err })
    this.deps.log.warn({ err, sessionId: rec.id, path: rel }, 'file operation failed')
    return new AppError('sandbox_failed', 'the file operation could not be carried out in the sandbox', { cause: err })
  }

  /** File work is activity: a ready session's idle deadline moves (a busy one's is its execution's). */
  private async touch(rec: SessionRecord): Promise<void> {
    await recordActivity(this.deps.stores, this.deps.log, rec, 'file')
  }
}

function toEntry(e: WorkspaceEntry): FileEntry {
  return { path: e.path, type: e.type, size: e.size, modified_at: new Date(Math.round(e.mtime * 1000)).toISOString() }
}
