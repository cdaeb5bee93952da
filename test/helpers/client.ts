// A small HTTP client for tests: JSON calls with a key, and an SSE reader that records
// when each event arrived.
import { API_KEY } from './app.js'

export interface SseEvent {
  id: string
  event: string
  data: any
  at: number
}

export async function api(
  base: string,
  method: string,
  path: string,
  body?: unknown,
  opts: { key?: string; headers?: Record<string, string> } = {},
): Promise<{ status: number; body: any; headers: Headers }> {
  const res = await fetch(base + path, {
    method,
    headers: {
      ...(opts.key === '' ? {} : { authorization: `Bearer ${opts.key ?? API_KEY}` }),
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...opts.headers,
    },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  })
  const text = await res.text()
  let parsed: any = text
  try {
    parsed = text ? JSON.parse(text) : null
  } catch {
    /* not JSON */
  }
  return { status: res.status, body: parsed, headers: res.headers }
}

/** Reads an SSE response to its end (or until `until` says stop), timestamping each event. */
export async function readSse(res: Response, until?: (e: SseEvent) => boolean): Promise<SseEvent[]> {
  const events: SseEvent[] = []
  const reader = res.body!.getReader()
  const decoder = new TextDecoder()
  let buf = ''
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    buf += decoder.decode(value, { stream: true })
    let idx
    while ((idx = buf.indexOf('\n\n')) !== -1) {
      const block = buf.slice(0, idx)
      buf = buf.slice(idx + 2)
      const e: SseEvent = { id: '', event: 'message', data: null, at: performance.now() }
      const data: string[] = []
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) continue
        const [field, ...rest] = line.split(':')
        const value = rest.join(':').replace(/^ /, '')
        if (field === 'id') e.id = value
        else if (field === 'event') e.event = value
        else if (field === 'data') data.push(value)
      }
      if (!data.length && !e.id) continue
      try {
        e.data = JSON.parse(data.join('\n'))
      } catch {
        e.data = data.join('\n')
      }
      events.push(e)
      if (until?.(e)) {
        await reader.cancel()
        return events
      }
    }
  }
  return events
}

export async function executeSse(
  base: string,
  sid: string,
  code: string,
  opts: { key?: string; timeout_s?: number; until?: (e: SseEvent) => boolean } = {},
): Promise<{ status: number; location: string | null; events: SseEvent[] }> {
  const res = await fetch(`${base}/v1/sessions/${sid}/executions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${opts.key ?? API_KEY}`, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({ code, ...(opts.timeout_s ? { timeout_s: opts.timeout_s } : {}) }),
  })
  if (res.status !== 200) return { status: res.status, location: null, events: [{ id: '', event: 'http', data: await res.json(), at: 0 }] }
  return { status: res.status, location: res.headers.get('location'), events: await readSse(res, opts.until ?? ((e) => e.event === 'done')) }
}

export async function createSession(base: string, body: Record<string, unknown> = {}, key?: string): Promise<string> {
  const r = await api(base, 'POST', '/v1/sessions', body, { key })
  if (r.status !== 201) throw new Error(`create failed: ${r.status} ${JSON.stringify(r.body)}`)
  return r.body.id
}

export const stdoutOf = (events: SseEvent[]) =>
  events
    .filter((e) => e.event === 'stdout')
    .map((e) => e.data.text)
    .join('')

/** The stdout of a JSON reply's events, joined: a line may come in more than one event. */
export const stdoutText = (events: Array<{ type: string; text?: string }> = []) =>
  events
    .filter((e) => e.type === 'stdout')
    .map((e) => e.text)
    .join('')

/** A readSse stop: once the stream's stdout so far holds `text` (a line may come in more than one event). */
export function untilStdout(text: string): (e: SseEvent) => boolean {
  let seen = ''
  return (e) => e.event === 'stdout' && (seen += e.data.text).includes(text)
}
