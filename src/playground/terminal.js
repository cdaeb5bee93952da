// The playground's terminal pane: xterm.js (served by the API from its npm package, no CDN) on the
// session's terminal socket (GET /v1/sessions/{id}/pty). A browser's WebSocket cannot send the key
// as a header, so the pane first mints a short-lived token (POST .../pty-token) with it.
/* global window, WebSocket, TextEncoder, ResizeObserver, URLSearchParams, location */
import { Terminal } from '/playground/xterm/xterm.mjs'
import { FitAddon } from '/playground/xterm/addon-fit.mjs'

const encoder = new TextEncoder()

export class TerminalPane {
  /**
   * `el`: where the terminal is drawn; `status(text)`: shows the pane's state; `session()`: the
   * session to open it in (made on first use); `api(method, path)`: a call with the page's key.
   */
  constructor({ el, status, session, api }) {
    this.el = el
    this.status = status
    this.session = session
    this.api = api
    this.ws = null
    this.term = null
    this.fit = null
  }

  get open() {
    return this.ws !== null
  }

  /** Opens a terminal in the session (closing one already open). */
  async connect() {
    this.close()
    this.status('connecting')
    const sid = await this.session()
    const { token } = await (await this.api('POST', `/v1/sessions/${sid}/pty-token`)).json()
    if (!this.term) this.draw()
    this.term.reset()
    this.fit.fit()
    const q = new URLSearchParams({ access_token: token, cols: String(this.term.cols), rows: String(this.term.rows) })
    const ws = new WebSocket(`${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/v1/sessions/${encodeURIComponent(sid)}/pty?${q}`)
    ws.binaryType = 'arraybuffer'
    this.ws = ws
    ws.onopen = () => {
      this.status(`open in ${sid}`)
      this.term.focus()
    }
    let exited = null
    ws.onmessage = (m) => {
      if (typeof m.data !== 'string') return this.term.write(new Uint8Array(m.data))
      const frame = JSON.parse(m.data)
      if (frame.type === 'exit') exited = `the shell exited (${frame.exit_code})`
    }
    ws.onclose = (e) => {
      if (this.ws !== ws) return
      this.ws = null
      this.status(exited ?? (e.reason ? `closed: ${e.reason}` : `closed (${e.code})`))
    }
  }

  /** Closes the terminal: the shell and what it started end. */
  close() {
    const ws = this.ws
    this.ws = null
    if (ws) ws.close()
    this.status('closed')
  }

  draw() {
    this.term = new Terminal({ cursorBlink: true, fontSize: 13, scrollback: 5000, convertEol: false })
    this.fit = new FitAddon()
    this.term.loadAddon(this.fit)
    this.term.open(this.el)
    const send = (bytes) => {
      if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(bytes)
    }
    // Keystrokes go as binary frames; a size change as the one text frame the socket takes.
    this.term.onData((text) => send(encoder.encode(text)))
    this.term.onBinary((text) => send(Uint8Array.from(text, (c) => c.charCodeAt(0))))
    this.term.onResize(({ cols, rows }) => send(JSON.stringify({ type: 'resize', cols, rows })))
    // The pane follows the window: the terminal is refitted to it, which resizes the shell's terminal.
    new ResizeObserver(() => this.fit.fit()).observe(this.el)
    window.addEventListener('resize', () => this.fit.fit())
  }
}
