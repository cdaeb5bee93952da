// The replcast API client: typed calls (shapes generated from openapi.yaml into schema.ts), errors
// thrown as ReplcastError subclasses, and executions streamed as resumable EventStreams.
import { ConnectionError, errorFromResponse, type Problem } from './errors.ts'
import { EventStream, type FollowOptions } from './events.ts'
import type { components } from './schema.ts'

type Schemas = components['schemas']
export type Session = Schemas['Session']
export type SessionList = Schemas['SessionList']
export type CreateSessionRequest = Schemas['CreateSessionRequest']
export type Execution = Schemas['Execution']
export type ExecuteRequest = Schemas['ExecuteRequest']

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
}

const env = (name: string): string | undefined => (typeof process === 'undefined' ? undefined : process.env[name])

export class ReplcastClient {
  readonly url: string
  private readonly apiKey: string
  private readonly fetch: typeof fetch

  constructor(opts: ClientOptions = {}) {
    this.url = (opts.url ?? env('REPLCAST_URL') ?? 'http://127.0.0.1:8080').replace(/\/+$/, '')
    this.apiKey = opts.apiKey ?? env('REPLCAST_API_KEY') ?? ''
    this.fetch = opts.fetch ?? globalThis.fetch.bind(globalThis)
  }

  createSession(body: CreateSessionRequest = {}): Promise<Session> {
    return this.json('POST', '/v1/sessions', body)
  }

  listSessions(opts: { limit?: number; cursor?: string } = {}): Promise<SessionList> {
    const q = new URLSearchParams()
    if (opts.limit) q.set('limit', String(opts.limit))
    if (opts.cursor) q.set('cursor', opts.cursor)
    return this.json('GET', `/v1/sessions${q.size ? `?${q.toString()}` : ''}`)
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
    return this.json('GET', `/v1/sessions/${enc(id)}`)
  }

  async deleteSession(id: string): Promise<void> {
    await this.request('DELETE', `/v1/sessions/${enc(id)}`)
  }

  /** Interrupts the running execution (KeyboardInterrupt); throws ConflictError nothing_running when idle. */
  async interrupt(id: string): Promise<void> {
    await this.request('POST', `/v1/sessions/${enc(id)}/interrupt`)
  }

  restartSession(id: string): Promise<Session> {
    return this.json('POST', `/v1/sessions/${enc(id)}/restart`)
  }

  /** Runs code and waits for it to end; the execution with all its events. */
  execute(sessionId: string, code: string, opts: { timeout_s?: number } = {}): Promise<Execution> {
    return this.json('POST', `/v1/sessions/${enc(sessionId)}/executions`, { code, ...opts })
  }

  /**
   * Starts running code and returns its events as they happen. The stream reconnects by itself after
   * a dropped connection (see EventStream). Starting is not retried: a failure throws.
   */
  async stream(sessionId: string, code: string, opts: StreamOptions = {}): Promise<ExecutionStream> {
    const { timeout_s, ...follow } = opts
    const body: ExecuteRequest = { code, ...(timeout_s === undefined ? {} : { timeout_s }) }
    const res = await this.request('POST', `/v1/sessions/${enc(sessionId)}/executions`, body, { accept: 'text/event-stream' }, follow.signal)
    const executionId = /\/executions\/([^/?]+)$/.exec(res.headers.get('location') ?? '')?.[1]
    if (!executionId) throw new ConnectionError('network', 'the server did not name the execution (no Location header)')
    return new ExecutionStream(sessionId, decodeURIComponent(executionId), (last, signal) => this.openEvents(sessionId, executionId, last, signal), res, follow)
  }

  /** Follows an execution's events from `lastEventId` (replayed, then live until done). */
  events(sessionId: string, executionId: string, opts: FollowOptions = {}): EventStream {
    return new EventStream((last, signal) => this.openEvents(sessionId, executionId, last, signal), null, opts)
  }

  getExecution(sessionId: string, executionId: string): Promise<Execution> {
    return this.json('GET', `/v1/sessions/${enc(sessionId)}/executions/${enc(executionId)}`)
  }

  private async openEvents(sid: string, eid: string, lastEventId: string, signal?: AbortSignal): Promise<Response | null> {
    const res = await this.request(
      'GET',
      `/v1/sessions/${enc(sid)}/executions/${enc(eid)}/events`,
      undefined,
      { accept: 'text/event-stream', ...(lastEventId ? { 'last-event-id': lastEventId } : {}) },
      signal,
    )
    return res.status === 204 ? null : res
  }

  private async json<T>(method: string, path: string, body?: unknown): Promise<T> {
    return (await (await this.request(method, path, body)).json()) as T
  }

  /** One call; non-2xx answers throw their typed error, a failed connection throws ConnectionError. */
  private async request(method: string, path: string, body?: unknown, headers: Record<string, string> = {}, signal?: AbortSignal): Promise<Response> {
    let res: Response
    try {
      res = await this.fetch(this.url + path, {
        method,
        signal,
        headers: {
          accept: 'application/json',
          ...(this.apiKey ? { authorization: `Bearer ${this.apiKey}` } : {}),
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...headers,
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      })
    } catch (err) {
      if (signal?.aborted) throw err
      const cause = (err as { cause?: { code?: string } }).cause
      throw new ConnectionError('network', `cannot reach ${this.url}${cause?.code ? ` (${cause.code})` : ''}`, { cause: err })
    }
    if (res.ok) return res
    const text = await res.text().catch(() => '')
    let problem: Problem | null = null
    try {
      problem = text ? (JSON.parse(text) as Problem) : null
    } catch {
      /* not problem+json (a proxy's page) */
    }
    throw errorFromResponse(res.status, problem, res.headers.get('retry-after'))
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
