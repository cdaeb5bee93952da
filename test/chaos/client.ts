// The chaos soak's HTTP client, a careful user's: every answer is counted and held to the contract
// (errors are problem+json, a 503 says Retry-After), a refused connection is retried on the next
// instance, and an SSE stream that goes quiet (no event, no heartbeat) is given up, to be resumed.
import { API_KEY } from '../helpers/app.js'
import type { Tally } from './tally.js'

export interface SseEvent {
  id: string
  event: string
  data: any
}

/** What came back: an answer, a refused connection (the request never arrived), or a broken one (it may have). */
export type Outcome = { kind: 'answer'; res: Response; code: string } | { kind: 'refused' } | { kind: 'broken'; why: string }

/** How long an answer's headers may take: past an instance's SIGSTOP (5 s) and a takeover. */
const HEADERS_TIMEOUT_MS = 20_000
/** A stream with nothing at all (the instances send a heartbeat every second) for this long is cut. */
const QUIET_MS = 4000

const auth = { authorization: `Bearer ${API_KEY}` }

export class ChaosClient {
  constructor(private readonly tally: Tally) {}

  /**
   * Sends one request. A non-2xx answer's body is read here (its `code` returned) and held to the
   * contract; a 2xx answer's body is left to the caller.
   */
  async send(url: string, init: RequestInit & { json?: unknown; sse?: boolean; lastEventId?: string }): Promise<Outcome> {
    const headers: Record<string, string> = { ...auth }
    if (init.json !== undefined) headers['content-type'] = 'application/json'
    if (init.sse) headers.accept = 'text/event-stream'
    if (init.lastEventId) headers['last-event-id'] = init.lastEventId
    const ctl = new AbortController()
    const timer = setTimeout(() => ctl.abort(), HEADERS_TIMEOUT_MS)
    let res: Response
    try {
      res = await fetch(url, { method: init.method, headers, body: init.json === undefined ? undefined : JSON.stringify(init.json), signal: ctl.signal })
    } catch (err) {
      const cause = (err as { cause?: { code?: string } }).cause
      if (cause?.code === 'ECONNREFUSED') return { kind: 'refused' }
      return { kind: 'broken', why: cause?.code ?? (err as Error).message }
    } finally {
      clearTimeout(timer)
    }
    if (res.ok) {
      this.tally.answer(String(res.status))
      return { kind: 'answer', res, code: '' }
    }
    let text = ''
    try {
      text = await res.text()
    } catch {
      return { kind: 'broken', why: `the body of a ${res.status} broke off` }
    }
    let code = ''
    try {
      code = String(JSON.parse(text).code ?? '')
    } catch {
      /* not JSON: reported below */
    }
    this.tally.answer(`${res.status} ${code || '-'}`)
    const type = res.headers.get('content-type') ?? ''
    const what = `${init.method ?? 'GET'} ${new URL(url).pathname}`
    if (!type.startsWith('application/problem+json')) this.tally.violation('not_problem', `${what} → ${res.status} ${type}: ${text.slice(0, 200)}`)
    else if (res.status === 503 && !res.headers.get('retry-after')) this.tally.violation('not_problem', `${what} → 503 ${code} without Retry-After`)
    if (res.status === 500) this.tally.violation('internal', `${what} → 500: ${text.slice(0, 200)}`)
    return { kind: 'answer', res, code }
  }

  /**
   * Reads an SSE stream to its end, handing each event with data to `onEvent` (a `shutdown` event
   * too: it has no id). Resolves true when it ended on its own, false when it broke, went quiet, or
   * was still open at `until` (a performance.now() time: heartbeats alone keep a stream open forever).
   */
  async read(res: Response, onEvent: (e: SseEvent) => void, until = Infinity): Promise<boolean> {
    const reader = res.body!.getReader()
    const decoder = new TextDecoder()
    let buf = ''
    let quiet: NodeJS.Timeout | undefined
    let cancelled = false
    const arm = () => {
      clearTimeout(quiet)
      quiet = setTimeout(() => {
        cancelled = true
        reader.cancel().catch(() => undefined)
      }, QUIET_MS)
    }
    arm()
    const late = setTimeout(
      () => {
        cancelled = true
        reader.cancel().catch(() => undefined)
      },
      Math.min(2 ** 31 - 1, Math.max(0, until - performance.now())),
    )
    try {
      for (;;) {
        const { done, value } = await reader.read()
        if (done) return !cancelled && buf.trim() === ''
        arm()
        buf += decoder.decode(value, { stream: true })
        let idx
        while ((idx = buf.indexOf('\n\n')) !== -1) {
          const e = parseBlock(buf.slice(0, idx))
          buf = buf.slice(idx + 2)
          if (e) onEvent(e)
        }
      }
    } catch {
      return false
    } finally {
      clearTimeout(quiet)
      clearTimeout(late)
    }
  }

  /** Waits what a 503's (or 429's) Retry-After asks, at most `capMs`. */
  static async backOff(res: Response | null, capMs = 2000): Promise<void> {
    const s = Number(res?.headers.get('retry-after') ?? 0)
    await new Promise((r) => setTimeout(r, Math.min(capMs, Number.isFinite(s) && s > 0 ? s * 1000 : 200)))
  }
}

function parseBlock(block: string): SseEvent | null {
  const e: SseEvent = { id: '', event: 'message', data: null }
  const data: string[] = []
  for (const line of block.split('\n')) {
    if (line.startsWith(':')) continue
    const at = line.indexOf(':')
    const field = at < 0 ? line : line.slice(0, at)
    const value = at < 0 ? '' : line.slice(at + 1).replace(/^ /, '')
    if (field === 'id') e.id = value
    else if (field === 'event') e.event = value
    else if (field === 'data') data.push(value)
  }
  if (!data.length && !e.id) return null
  try {
    e.data = JSON.parse(data.join('\n'))
  } catch {
    e.data = data.join('\n')
  }
  return e
}
