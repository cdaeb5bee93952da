// A terminal over a WebSocket (GET /v1/sessions/{id}/pty): binary frames carry the terminal's bytes
// both ways, a text frame {"type":"resize","cols":N,"rows":N} resizes it, and the server's last text
// frame {"type":"exit","exit_code":N} says the shell exited. Both ways have backpressure: output the
// client has not taken past `bufferBytes` stops the reading of the shell (whose writes then wait in
// the sandbox's pseudo-terminal, not in the API's memory), and input the shell does not take stops
// the reading of the socket. Closing the socket ends the shell and what it started.
import type { Logger } from 'pino'
import type { RawData, WebSocket } from 'ws'
import type { SessionTerminal } from '../sessions/index.js'

/** WebSocket close codes this route uses (RFC 6455 §7.4.1). */
const CLOSE = { normal: 1000, goingAway: 1001, policy: 1008, error: 1011 } as const
/** The largest size either way the pseudo-terminal takes (its fields are 16 bits; no screen is larger). */
export const MAX_TERMINAL_SIDE = 1000
/** The largest frame a client may send (a paste); a larger one closes the socket (1009). */
export const MAX_INPUT_FRAME_BYTES = 1024 * 1024

export interface PtySocketOptions {
  /** Output held for the client past which the shell is not read (TERMINAL_BUFFER_BYTES). */
  bufferBytes: number
  /** Pings keep idle terminals open through proxies that cut quiet connections. */
  pingMs: number
  log: Pick<Logger, 'warn' | 'info'>
}

/** A resize frame's size, or null when the text is not one. */
export function parseResize(text: string): { cols: number; rows: number } | null {
  let m: unknown
  try {
    m = JSON.parse(text)
  } catch {
    return null
  }
  const side = (v: unknown) => Number.isInteger(v) && (v as number) >= 1 && (v as number) <= MAX_TERMINAL_SIDE
  if (typeof m !== 'object' || m === null) return null
  const { type, cols, rows } = m as Record<string, unknown>
  return type === 'resize' && side(cols) && side(rows) ? { cols: cols as number, rows: rows as number } : null
}

/** A close reason within the protocol's 123 bytes. */
function reason(text: string): string {
  const b = Buffer.from(text)
  return b.length <= 123
    ? text
    : b
        .subarray(0, 120)
        .toString('utf8')
        .replace(/\uFFFD$/, '') + '...'
}

/** How long a closing instance waits for its sockets' close handshakes before it cuts them. */
const CLOSE_GRACE_MS = 1000

/**
 * The instance is stopping: every socket is closed with 1001 and `why`; one whose client does not
 * answer within a moment (it reads nothing) is cut, so stopping is not held up by it.
 */
export async function closeSockets(sockets: Iterable<WebSocket>, why: string): Promise<void> {
  const open = [...sockets]
  for (const ws of open) ws.close(CLOSE.goingAway, why)
  let timer: NodeJS.Timeout | undefined
  const closed = open.map((ws) => new Promise((resolve) => (ws.readyState === ws.CLOSED ? resolve(null) : ws.once('close', resolve))))
  await Promise.race([Promise.all(closed), new Promise((resolve) => (timer = setTimeout(resolve, CLOSE_GRACE_MS)))])
  clearTimeout(timer)
  for (const ws of open) ws.terminate()
}

/** Joins `ws` to the terminal until either ends. */
export function bridgeTerminal(ws: WebSocket, t: SessionTerminal, opts: PtySocketOptions): void {
  const { output, input } = t.terminal
  let held = 0
  let paused = false
  const taken = (n: number) => () => {
    held -= n
    if (paused && held <= opts.bufferBytes / 2) {
      paused = false
      output.resume()
    }
  }
  output.on('data', (chunk: Buffer) => {
    t.activity()
    held += chunk.length
    // The callback comes once the socket has handed the frame to the kernel (or failed to).
    ws.send(chunk, { binary: true }, taken(chunk.length))
    if (!paused && held > opts.bufferBytes) {
      paused = true
      output.pause()
    }
  })

  ws.on('message', (data: RawData, isBinary: boolean) => {
    const bytes = Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data)
    if (!isBinary) {
      const size = parseResize(bytes.toString('utf8'))
      if (size) t.terminal.resize(size)
      else ws.close(CLOSE.policy, `a text frame must be {"type":"resize","cols":N,"rows":N}, each 1..${MAX_TERMINAL_SIDE}`)
      return
    }
    t.activity()
    if (!input.write(bytes)) {
      // The shell is not taking its input: the client's frames wait in its own connection.
      ws.pause()
      input.once('drain', () => ws.resume())
    }
  })

  const ping = setInterval(() => ws.ping(), opts.pingMs)
  ping.unref()
  ws.once('close', () => {
    clearInterval(ping)
    void t.close()
  })
  void t.outcome.then((o) => {
    if (ws.readyState !== ws.OPEN) return
    if (o.kind === 'exit') {
      ws.send(JSON.stringify({ type: 'exit', exit_code: o.exitCode }))
      ws.close(CLOSE.normal, 'the shell exited')
    } else ws.close(CLOSE.goingAway, reason(o.why))
  })
}
