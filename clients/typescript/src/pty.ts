// A session's terminal over a WebSocket (GET /v1/sessions/{id}/pty): an interactive bash in the
// session's sandbox. Keystrokes and output travel as bytes (binary frames), a resize as the one text
// frame the server takes, and the server's last text frame says how the shell exited. It uses the
// platform's WebSocket (Node >= 22, browsers, Deno, Bun) or a constructor passed in (the `ws` package on Node 20).

/** The part of a WHATWG WebSocket this uses. */
export interface WebSocketLike {
  binaryType: string
  readonly readyState: number
  readonly bufferedAmount: number
  send(data: string | ArrayBufferLike | ArrayBufferView): void
  close(code?: number, reason?: string): void
  addEventListener(type: 'open' | 'message' | 'close' | 'error', listener: (e: never) => void): void
}

export type WebSocketConstructor = new (url: string) => WebSocketLike

export interface PtyOptions {
  /** The terminal's size at the start (default 80 x 24). */
  cols?: number
  rows?: number
  /** A WebSocket implementation, where the platform has none. */
  WebSocket?: WebSocketConstructor
}

/**
 * How the terminal ended. `exitCode`: the shell's, when it exited by itself (null otherwise); `code`
 * and `reason`: the socket's close (1000 after an exit, 1001 when the session was deleted, restarted
 * or moved, or the server stopped; 1006 when the connection dropped).
 */
export interface PtyEnd {
  exitCode: number | null
  code: number
  reason: string
}

const OPEN = 1

/** An open terminal. Output that arrives before `onData` is called is kept for it. */
export class Pty {
  /** Resolves once the socket closed. */
  readonly closed: Promise<PtyEnd>
  private listener: ((bytes: Uint8Array) => void) | null = null
  private early: Uint8Array[] = []
  private exitCode: number | null = null
  private readonly encoder = new TextEncoder()
  private readonly ws: WebSocketLike

  constructor(ws: WebSocketLike) {
    this.ws = ws
    ws.addEventListener('message', (e: { data: unknown }) => {
      if (typeof e.data === 'string') {
        const frame = JSON.parse(e.data) as { type?: string; exit_code?: number | null }
        if (frame.type === 'exit') this.exitCode = frame.exit_code ?? null
        return
      }
      const bytes = new Uint8Array(e.data as ArrayBuffer)
      if (this.listener) this.listener(bytes)
      else this.early.push(bytes)
    })
    this.closed = new Promise((resolve) =>
      ws.addEventListener('close', (e: { code: number; reason: string }) => resolve({ exitCode: this.exitCode, code: e.code, reason: e.reason })),
    )
  }

  /** Calls `listener` with each piece of output (raw bytes, UTF-8 split anywhere) from now on. */
  onData(listener: (bytes: Uint8Array) => void): void {
    this.listener = listener
    const early = this.early
    this.early = []
    for (const b of early) listener(b)
  }

  /** Sends keystrokes (text as UTF-8, or bytes); nothing once the socket is closed. */
  write(data: string | Uint8Array): void {
    if (this.ws.readyState !== OPEN) return
    this.ws.send(typeof data === 'string' ? this.encoder.encode(data) : data)
  }

  /** Resizes the terminal (1..1000 each way); the shell gets SIGWINCH. */
  resize(cols: number, rows: number): void {
    if (this.ws.readyState !== OPEN) return
    this.ws.send(JSON.stringify({ type: 'resize', cols: Math.round(cols), rows: Math.round(rows) }))
  }

  /** Bytes written and not yet sent: a caller with much to send can wait while this is high. */
  get bufferedAmount(): number {
    return this.ws.bufferedAmount
  }

  /** Closes the terminal: the shell and everything it started end. */
  close(): void {
    this.ws.close(1000)
  }
}

/** Opens the socket at `url` and resolves once it is open; rejects with the failure's message when it cannot be. */
export function connectPty(url: string, opts: PtyOptions = {}): Promise<Pty> {
  const Ctor = opts.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket
  if (!Ctor) return Promise.reject(new Error('no WebSocket here: pass one as the WebSocket option (Node < 22: the ws package)'))
  const ws = new Ctor(url)
  ws.binaryType = 'arraybuffer'
  const pty = new Pty(ws)
  return new Promise((resolve, reject) => {
    let open = false
    ws.addEventListener('open', () => {
      open = true
      resolve(pty)
    })
    ws.addEventListener('error', (e: { message?: string }) => {
      if (!open) reject(new Error(e.message ?? 'the socket could not be opened'))
    })
    ws.addEventListener('close', (e: { code: number; reason: string }) => {
      if (!open) reject(new Error(`the socket closed before it opened (${e.code}${e.reason ? `: ${e.reason}` : ''})`))
    })
  })
}
