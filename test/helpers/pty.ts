// A terminal client for tests (GET /v1/sessions/{id}/pty over the `ws` package): what the terminal
// showed so far as text, waits on what it shows, the close code and reason, the exit frame; and an
// upgrade the server refuses, read as the HTTP answer it is.
import WebSocket from 'ws'
import { API_KEY } from './app.js'
import { waitFor } from './wait.js'

export interface PtyClient {
  ws: WebSocket
  /** Everything the terminal showed so far, decoded as UTF-8. */
  text(): string
  /** Waits until what the terminal showed (from `from`, a position in text()) matches; returns the match. */
  until(re: RegExp, ms?: number, from?: number): Promise<RegExpMatchArray>
  /** Sends keystrokes (a binary frame). */
  type(keys: string): void
  resize(cols: number, rows: number): void
  /** The {"type":"exit"} frame, once it came. */
  exit(): { exit_code: number | null } | null
  /** Resolves with the close code and reason once the socket closed. */
  closed: Promise<{ code: number; reason: string }>
}

export interface PtyOptions {
  key?: string
  token?: string
  cols?: number
  rows?: number
}

function ptyUrl(base: string, sid: string, opts: PtyOptions = {}): string {
  const q = new URLSearchParams()
  if (opts.cols) q.set('cols', String(opts.cols))
  if (opts.rows) q.set('rows', String(opts.rows))
  if (opts.token) q.set('access_token', opts.token)
  return `${base.replace(/^http/, 'ws')}/v1/sessions/${sid}/pty${q.size ? `?${q.toString()}` : ''}`
}

/** Opens the session's terminal; rejects with the HTTP answer's status and body when the upgrade is refused. */
export async function openPty(base: string, sid: string, opts: PtyOptions = {}): Promise<PtyClient> {
  const headers = opts.token || opts.key === '' ? {} : { authorization: `Bearer ${opts.key ?? API_KEY}` }
  const ws = new WebSocket(ptyUrl(base, sid, opts), { headers })
  const chunks: Buffer[] = []
  let exit: { exit_code: number | null } | null = null
  ws.on('message', (data: Buffer, isBinary) => {
    if (isBinary) chunks.push(data)
    else exit = JSON.parse(data.toString())
  })
  const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })))
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve())
    ws.once('unexpected-response', (_req, res) => {
      let body = ''
      res.on('data', (c: Buffer) => (body += c.toString()))
      res.on('end', () =>
        reject(Object.assign(new Error(`upgrade refused: ${res.statusCode} ${body}`), { status: res.statusCode, body: JSON.parse(body || 'null') })),
      )
    })
    ws.once('error', reject)
  })
  const text = () => Buffer.concat(chunks).toString('utf8')
  return {
    ws,
    text,
    async until(re, ms = 20000, from = 0) {
      let m: RegExpMatchArray | null = null
      const ok = await waitFor(() => (m = text().slice(from).match(re)) !== null, ms, 10)
      if (!ok || !m) throw new Error(`the terminal never showed ${re}; it showed: ${JSON.stringify(text().slice(from).slice(-2000))}`)
      return m
    },
    type: (keys) => ws.send(Buffer.from(keys)),
    resize: (cols, rows) => ws.send(JSON.stringify({ type: 'resize', cols, rows })),
    exit: () => exit,
    closed,
  }
}

/** An upgrade the server must refuse: its HTTP status and problem body. */
export async function refusedPty(base: string, sid: string, opts: PtyOptions = {}): Promise<{ status: number; body: any }> {
  try {
    const p = await openPty(base, sid, opts)
    p.ws.close()
    return { status: 101, body: null }
  } catch (err) {
    const e = err as { status?: number; body?: unknown }
    if (e.status === undefined) throw err
    return { status: e.status, body: e.body }
  }
}

/** Runs a command in the terminal and returns what it printed between two markers (the typed line's echo does not match them). */
export async function shellOutput(p: PtyClient, command: string, ms = 20000): Promise<string> {
  const tag = Math.random().toString(36).slice(2, 8)
  const from = p.text().length
  p.type(`echo "<${tag}<"; ${command}; echo ">${tag}>"\r`)
  // The echoed line holds `"<tag<"` in quotes; the output holds it bare at a line's start (after bash's escape sequences and a \r).
  const m = await p.until(new RegExp(`(?:^|[\\r\\n])<${tag}<(?:\\r?\\n)?([\\s\\S]*?)(?:\\r?\\n)?>${tag}>`), ms, from)
  return m[1]!
}

/** Closes the terminal and waits for the close handshake. */
export async function closePty(p: PtyClient): Promise<void> {
  p.ws.close()
  await p.closed
}
