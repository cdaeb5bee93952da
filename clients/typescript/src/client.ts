// The replcast API client: typed calls (shapes generated from openapi.yaml into schema.ts), errors
// thrown as ReplcastError subclasses, and executions streamed as resumable EventStreams. Upload
// bodies and one-shot input files are prepared in files.ts.
import { ConnectionError } from './errors.ts'
import { EventStream, type FollowOptions } from './events.ts'
import {
  filePath,
  modeQuery,
  oneShotBody,
  RawBody,
  type FileBody,
  type FileDownload,
  type FileList,
  type OnceOptions,
  type PutFileResult,
  type TemplateList,
} from './files.ts'
import { Http } from './http.ts'
import { connectPty, type Pty, type PtyOptions } from './pty.ts'
import type { components } from './schema.ts'

type Schemas = components['schemas']
export type Session = Schemas['Session']
export type SessionList = Schemas['SessionList']
export type CreateSessionRequest = Schemas['CreateSessionRequest']
export type Execution = Schemas['Execution']
export type ExecuteRequest = Schemas['ExecuteRequest']
export type Process = Schemas['Process']
export type StartProcessRequest = Schemas['StartProcessRequest']
export type ProcessSignal = Schemas['SignalRequest']['signal']
export type Snapshot = Schemas['Snapshot']
export type SnapshotList = Schemas['SnapshotList']
export type ForkRequest = Schemas['ForkRequest']

export interface ClientOptions {
  /** The server, e.g. http://127.0.0.1:8080 (default: REPLCAST_URL, else that). */
  url?: string
  /** An API key (default: REPLCAST_API_KEY). */
  apiKey?: string
  /** A fetch to use instead of the global one. */
  fetch?: typeof fetch
}

export interface StreamOptions extends Omit<FollowOptions, 'lastEventId'> {
  /** Wall-clock limit in seconds. */
  timeout_s?: number
  /** python (default), or bash: a script whose `done` event carries `exit_code`. */
  language?: ExecuteRequest['language']
}

const env = (name: string): string | undefined => (typeof process === 'undefined' ? undefined : process.env[name])

export class ReplcastClient {
  readonly url: string
  private readonly http: Http

  constructor(opts: ClientOptions = {}) {
    this.url = (opts.url ?? env('REPLCAST_URL') ?? 'http://127.0.0.1:8080').replace(/\/+$/, '')
    this.http = new Http(this.url, opts.apiKey ?? env('REPLCAST_API_KEY') ?? '', opts.fetch ?? globalThis.fetch.bind(globalThis))
  }

  createSession(body: CreateSessionRequest = {}): Promise<Session> {
    return this.http.json('POST', '/v1/sessions', body)
  }

  listSessions(opts: { limit?: number; cursor?: string } = {}): Promise<SessionList> {
    const q = new URLSearchParams()
    if (opts.limit) q.set('limit', String(opts.limit))
    if (opts.cursor) q.set('cursor', opts.cursor)
    return this.http.json('GET', `/v1/sessions${q.size ? `?${q.toString()}` : ''}`)
  }

  /** Every session, page after page. */
  async *allSessions(): AsyncGenerator<Session> {
    let cursor: string | undefined
    do {
      const page = await this.listSessions({ limit: 200, cursor })
      yield* page.sessions
      cursor = page.next_cursor ?? undefined
    } while (cursor)
  }

  getSession(id: string): Promise<Session> {
    return this.http.json('GET', `/v1/sessions/${enc(id)}`)
  }

  async deleteSession(id: string): Promise<void> {
    await this.http.request('DELETE', `/v1/sessions/${enc(id)}`)
  }

  /** Interrupts the running execution (KeyboardInterrupt); throws ConflictError nothing_running when idle. */
  async interrupt(id: string): Promise<void> {
    await this.http.request('POST', `/v1/sessions/${enc(id)}/interrupt`)
  }

  restartSession(id: string): Promise<Session> {
    return this.http.json('POST', `/v1/sessions/${enc(id)}/restart`)
  }

  /**
   * Hibernates a runsc session: its state (namespace, workspace, cwd, env) goes to disk and its sandbox
   * away, so it holds no memory until used again. Any later use wakes it; hibernating a hibernated
   * session changes nothing. Throws ConflictError session_busy (code is running) or not_supported
   * (a runtime that cannot checkpoint), ServerError checkpoint_space (no disk for the checkpoint).
   */
  hibernate(id: string): Promise<Session> {
    return this.http.json('POST', `/v1/sessions/${enc(id)}/hibernate`)
  }

  /** Wakes a hibernated session now, ahead of its use (a live session is answered as it is). */
  wake(id: string): Promise<Session> {
    return this.http.json('POST', `/v1/sessions/${enc(id)}/wake`)
  }

  /**
   * Snapshots a runsc session's state (memory, workspace files, processes); the session runs on after
   * a short pause. `createSession({ snapshot_id })` starts new sessions from it. Throws ConflictError
   * session_busy or not_supported, RateLimitError quota_exceeded (max_snapshots, max_snapshot_bytes).
   */
  snapshot(sessionId: string, opts: { name?: string } = {}): Promise<Snapshot> {
    return this.http.json('POST', `/v1/sessions/${enc(sessionId)}/snapshots`, opts)
  }

  listSnapshots(opts: { limit?: number; cursor?: string } = {}): Promise<SnapshotList> {
    const q = new URLSearchParams()
    if (opts.limit) q.set('limit', String(opts.limit))
    if (opts.cursor) q.set('cursor', opts.cursor)
    return this.http.json('GET', `/v1/snapshots${q.size ? `?${q.toString()}` : ''}`)
  }

  /** Every snapshot, page after page. */
  async *allSnapshots(): AsyncGenerator<Snapshot> {
    let cursor: string | undefined
    do {
      const page = await this.listSnapshots({ limit: 200, cursor })
      yield* page.snapshots
      cursor = page.next_cursor ?? undefined
    } while (cursor)
  }

  getSnapshot(id: string): Promise<Snapshot> {
    return this.http.json('GET', `/v1/snapshots/${enc(id)}`)
  }

  /** Deletes a snapshot and its checkpoint; sessions started from it keep running. */
  async deleteSnapshot(id: string): Promise<void> {
    await this.http.request('DELETE', `/v1/snapshots/${enc(id)}`)
  }

  /**
   * `count` (1-16) new sessions, each with the session's state now, independent afterwards; the
   * session runs on after a short pause. All or nothing: a copy that cannot be made leaves none.
   */
  async fork(sessionId: string, opts: ForkRequest = {}): Promise<Session[]> {
    return (await this.http.json<{ sessions: Session[] }>('POST', `/v1/sessions/${enc(sessionId)}/fork`, opts)).sessions
  }

  /** Runs code (Python, or bash with `language: 'bash'`) and waits for it to end; the execution with all its events. */
  execute(sessionId: string, code: string, opts: Omit<ExecuteRequest, 'code'> = {}): Promise<Execution> {
    return this.http.json('POST', `/v1/sessions/${enc(sessionId)}/executions`, { code, ...opts })
  }

  /**
   * Starts running code and returns its events as they happen. The stream reconnects by itself after
   * a dropped connection (see EventStream). Starting is not retried: a failure throws.
   */
  async stream(sessionId: string, code: string, opts: StreamOptions = {}): Promise<ExecutionStream> {
    const { timeout_s, language, ...follow } = opts
    const body: ExecuteRequest = { code, ...(timeout_s === undefined ? {} : { timeout_s }), ...(language === undefined ? {} : { language }) }
    const res = await this.http.request('POST', `/v1/sessions/${enc(sessionId)}/executions`, body, { accept: 'text/event-stream' }, follow.signal)
    const executionId = /\/executions\/([^/?]+)$/.exec(res.headers.get('location') ?? '')?.[1]
    if (!executionId) throw new ConnectionError('network', 'the server did not name the execution (no Location header)')
    return new ExecutionStream(sessionId, decodeURIComponent(executionId), (last, signal) => this.openEvents(sessionId, executionId, last, signal), res, follow)
  }

  /** Follows an execution's events from `lastEventId` (replayed, then live until done). */
  events(sessionId: string, executionId: string, opts: FollowOptions = {}): EventStream {
    return new EventStream((last, signal) => this.openEvents(sessionId, executionId, last, signal), null, opts)
  }

  getExecution(sessionId: string, executionId: string): Promise<Execution> {
    return this.http.json('GET', `/v1/sessions/${enc(sessionId)}/executions/${enc(executionId)}`)
  }

  /** Runs code once in a fresh sandbox, removed afterwards (POST /v1/execute), and waits: the execution with all its events. */
  runOnce(code: string, opts: OnceOptions = {}): Promise<Execution> {
    return this.http.json('POST', '/v1/execute', oneShotBody(code, opts))
  }

  /**
   * Runs code once in a fresh sandbox and returns its events as they happen. Its sandbox goes when the
   * reply ends, so a dropped connection cannot be resumed: the stream then throws ConnectionError.
   */
  async streamOnce(code: string, opts: OnceOptions & Omit<FollowOptions, 'lastEventId'> = {}): Promise<EventStream> {
    const { signal, maxRetries, retryDelayMs, onReconnect, ...once } = opts
    const res = await this.http.request('POST', '/v1/execute', oneShotBody(code, once), { accept: 'text/event-stream' }, signal)
    return new EventStream(null, res, { signal, maxRetries, retryDelayMs, onReconnect })
  }

  /** The templates a session or one-shot may name. */
  listTemplates(): Promise<TemplateList> {
    return this.http.json('GET', '/v1/templates')
  }

  /**
   * Uploads a file into the session's /workspace (parent folders are created; a file is replaced whole
   * or not at all). A stream body is sent as it is read, never gathered in memory. `mode`: 0o755 or '755'.
   */
  async putFile(sessionId: string, path: string, body: FileBody, opts: { mode?: number | string; signal?: AbortSignal } = {}): Promise<PutFileResult> {
    const q = opts.mode === undefined ? '' : `?mode=${modeQuery(opts.mode)}`
    const res = await this.http.request('PUT', `${this.filesUrl(sessionId)}/${filePath(path)}${q}`, new RawBody(body), {}, opts.signal)
    return { ...((await res.json()) as PutFileResult), created: res.status === 201 }
  }

  /** Downloads a file as a stream (read its `body` once, or cancel it). */
  async getFile(sessionId: string, path: string, opts: { signal?: AbortSignal } = {}): Promise<FileDownload> {
    const res = await this.http.request('GET', `${this.filesUrl(sessionId)}/${filePath(path)}`, undefined, { accept: '*/*' }, opts.signal)
    return {
      body: res.body ?? new ReadableStream(),
      contentType: res.headers.get('content-type') ?? 'application/octet-stream',
      size: Number(res.headers.get('content-length') ?? 0),
    }
  }

  /** A file's bytes, whole (getFile streams them). */
  async readFile(sessionId: string, path: string): Promise<Uint8Array> {
    return new Uint8Array(await new Response((await this.getFile(sessionId, path)).body).arrayBuffer())
  }

  /** A file's text (UTF-8), whole. */
  async readTextFile(sessionId: string, path: string): Promise<string> {
    return new Response((await this.getFile(sessionId, path)).body).text()
  }

  /** A folder's files and folders (default /workspace itself; recursive: everything below it), sorted by path. */
  listFiles(sessionId: string, opts: { path?: string; recursive?: boolean } = {}): Promise<FileList> {
    const q = new URLSearchParams()
    if (opts.path) q.set('path', opts.path)
    if (opts.recursive) q.set('recursive', 'true')
    return this.http.json('GET', `${this.filesUrl(sessionId)}${q.size ? `?${q.toString()}` : ''}`)
  }

  /** Deletes a file, or a folder with everything in it when `recursive`. */
  async deleteFile(sessionId: string, path: string, opts: { recursive?: boolean } = {}): Promise<void> {
    await this.http.request('DELETE', `${this.filesUrl(sessionId)}/${filePath(path)}${opts.recursive ? '?recursive=true' : ''}`)
  }

  /**
   * Opens an interactive terminal (bash in the session's /workspace) over a WebSocket. The key goes in
   * a short-lived token minted first (POST .../pty-token), so any WebSocket works, a browser's too:
   * a missing or another tenant's session throws NotFoundError from that call. A socket that cannot
   * be opened (the session's terminals are all in use, its sandbox died) throws ConnectionError.
   */
  async pty(sessionId: string, opts: PtyOptions = {}): Promise<Pty> {
    const { token } = await this.http.json<{ token: string }>('POST', `/v1/sessions/${enc(sessionId)}/pty-token`)
    const q = new URLSearchParams({ access_token: token, cols: String(opts.cols ?? 80), rows: String(opts.rows ?? 24) })
    const url = `${this.url.replace(/^http/, 'ws')}/v1/sessions/${enc(sessionId)}/pty?${q.toString()}`
    try {
      return await connectPty(url, opts)
    } catch (err) {
      throw new ConnectionError('network', `cannot open the terminal of ${sessionId}: ${(err as Error).message}`, { cause: err })
    }
  }

  /** Starts a background process: `bash -c command` in the sandbox, beside executions. */
  startProcess(sessionId: string, body: StartProcessRequest): Promise<Process> {
    return this.http.json('POST', this.processesUrl(sessionId), body)
  }

  /** The session's background processes, oldest first. */
  async listProcesses(sessionId: string): Promise<Process[]> {
    return (await this.http.json<{ processes: Process[] }>('GET', this.processesUrl(sessionId))).processes
  }

  getProcess(sessionId: string, processId: string): Promise<Process> {
    return this.http.json('GET', `${this.processesUrl(sessionId)}/${enc(processId)}`)
  }

  /**
   * A process's output events (stdout, stderr, limit) from `lastEventId`, replayed then live, ending
   * with its `exit` event; reconnects after a dropped connection as an execution's stream does.
   */
  processOutput(sessionId: string, processId: string, opts: FollowOptions = {}): EventStream {
    const url = `${this.processesUrl(sessionId)}/${enc(processId)}/output`
    return new EventStream((last, signal) => this.http.openStream(url, last, signal), null, opts)
  }

  /** Writes to a process's stdin (`eof`: then closes it). Throws ConflictError process_exited, stdin_closed, stdin_full. */
  async writeStdin(sessionId: string, processId: string, data: string | Uint8Array, opts: { eof?: boolean } = {}): Promise<void> {
    const url = `${this.processesUrl(sessionId)}/${enc(processId)}/stdin${opts.eof ? '?eof=true' : ''}`
    await this.http.request('POST', url, new RawBody(typeof data === 'string' ? new TextEncoder().encode(data) : data))
  }

  /** Sends a signal to the process's whole process group (TERM by default). */
  async signalProcess(sessionId: string, processId: string, signal: ProcessSignal = 'TERM'): Promise<void> {
    await this.http.request('POST', `${this.processesUrl(sessionId)}/${enc(processId)}/signal`, { signal })
  }

  /** Kills the process (its whole process group) and forgets it: its record and output are gone. */
  async deleteProcess(sessionId: string, processId: string): Promise<void> {
    await this.http.request('DELETE', `${this.processesUrl(sessionId)}/${enc(processId)}`)
  }

  private processesUrl(sessionId: string): string {
    return `/v1/sessions/${enc(sessionId)}/processes`
  }

  private filesUrl(sessionId: string): string {
    return `/v1/sessions/${enc(sessionId)}/files`
  }

  private openEvents(sid: string, eid: string, lastEventId: string, signal?: AbortSignal): Promise<Response | null> {
    return this.http.openStream(`/v1/sessions/${enc(sid)}/executions/${enc(eid)}/events`, lastEventId, signal)
  }
}

/** A running execution: its ids, and its events (iterate once). */
export class ExecutionStream extends EventStream {
  readonly sessionId: string
  readonly executionId: string

  constructor(sessionId: string, executionId: string, ...rest: ConstructorParameters<typeof EventStream>) {
    super(...rest)
    this.sessionId = sessionId
    this.executionId = executionId
  }
}

const enc = encodeURIComponent
