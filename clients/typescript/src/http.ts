// One HTTP call to the replcast API: the key, JSON or raw bodies, and any non-2xx answer thrown as
// its typed ReplcastError (a failed connection as ConnectionError).
import { ConnectionError, errorFromResponse, type Problem } from './errors.ts'
import { RawBody } from './files.ts'

export class Http {
  readonly url: string
  private readonly apiKey: string
  private readonly fetch: typeof globalThis.fetch

  constructor(url: string, apiKey: string, fetch: typeof globalThis.fetch) {
    this.url = url
    this.apiKey = apiKey
    this.fetch = fetch
  }

  /** GET of an SSE stream after `lastEventId`; null when the server says nothing more will come (204). */
  async openStream(path: string, lastEventId: string, signal?: AbortSignal): Promise<Response | null> {
    const res = await this.request('GET', path, undefined, { accept: 'text/event-stream', ...(lastEventId ? { 'last-event-id': lastEventId } : {}) }, signal)
    return res.status === 204 ? null : res
  }

  async json<T>(method: string, path: string, body?: unknown): Promise<T> {
    return (await (await this.request(method, path, body)).json()) as T
  }

  /** One call; non-2xx answers throw their typed error, a failed connection throws ConnectionError. */
  async request(method: string, path: string, body?: unknown, headers: Record<string, string> = {}, signal?: AbortSignal): Promise<Response> {
    let res: Response
    // A file's bytes go as they are (a stream half-duplex, as fetch requires); anything else as JSON.
    const raw = body instanceof RawBody ? body : null
    try {
      res = await this.fetch(this.url + path, {
        method,
        signal,
        headers: {
          accept: 'application/json',
          ...(this.apiKey ? { authorization: `Bearer ${this.apiKey}` } : {}),
          ...(body === undefined ? {} : { 'content-type': raw ? 'application/octet-stream' : 'application/json' }),
          ...headers,
        },
        body: raw ? raw.body : body === undefined ? undefined : JSON.stringify(body),
        ...(raw?.streamed ? { duplex: 'half' } : {}),
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
