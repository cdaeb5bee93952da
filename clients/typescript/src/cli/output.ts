// How the CLI writes: an execution's events to stdout/stderr as they arrive, colour only on a
// terminal (and not with NO_COLOR), and a progress line on a terminal's stderr during long waits.
import type { ExecutionEvent } from '../events.ts'

interface Sink {
  write(s: string): unknown
  isTTY?: boolean
}

export interface Io {
  out: Sink
  err: Sink
}

const SPINNER = '⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏'
/** Waits shorter than this show no progress line (it would only flicker). */
const QUIET_MS = 800

const colourOn = (s: Sink) => !!s.isTTY && !process.env.NO_COLOR && process.env.TERM !== 'dumb'
const paint = (on: boolean, code: string) => (s: string) => (on ? `\x1b[${code}m${s}\x1b[0m` : s)

/** A one-line "⠋ running · 12 s" on stderr, shown after a quiet spell and wiped before anything else is written. */
export class Progress {
  private label = ''
  private since = 0
  private quietSince = 0
  private shown = false
  private frame = 0
  private timer: NodeJS.Timeout | null = null
  private readonly enabled: boolean
  private readonly err: Sink

  constructor(io: Io) {
    this.err = io.err
    this.enabled = colourOn(io.err)
  }

  start(label: string): void {
    this.label = label
    this.since = this.quietSince = Date.now()
    if (!this.enabled || this.timer) return
    this.timer = setInterval(() => this.draw(), 100)
    this.timer.unref()
  }

  /** Output arrived: wipe the line and wait for the next quiet spell. */
  touch(): void {
    this.clear()
    this.quietSince = Date.now()
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer)
    this.timer = null
    this.clear()
  }

  private draw(): void {
    const now = Date.now()
    if (now - this.quietSince < QUIET_MS) return
    const secs = Math.floor((now - this.since) / 1000)
    this.frame = (this.frame + 1) % SPINNER.length
    this.err.write(`\r\x1b[2K\x1b[2m${SPINNER[this.frame]} ${this.label} · ${secs} s\x1b[0m`)
    this.shown = true
  }

  private clear(): void {
    if (this.shown) this.err.write('\r\x1b[2K')
    this.shown = false
  }
}

// eslint-disable-next-line no-control-regex -- colour codes start with ESC
const ANSI = /\x1b\[[0-9;]*[A-Za-z]/g
const IMAGE = /^image\//

/** Writes events as a terminal user expects: output as it comes, tracebacks in red, rich output described. */
export class EventPrinter {
  private readonly io: Io
  private readonly progress: Progress
  private readonly red: (s: string) => string
  private readonly dim: (s: string) => string
  private outEndsLine = true

  constructor(io: Io, progress: Progress) {
    this.io = io
    this.progress = progress
    this.red = paint(colourOn(io.err), '31')
    this.dim = paint(colourOn(io.err), '2')
  }

  print(e: ExecutionEvent): void {
    switch (e.type) {
      case 'stdout':
        return this.out(e.text ?? '')
      case 'stderr':
        return this.err(e.text ?? '')
      case 'result':
      case 'display':
        return this.bundle(e.data ?? {})
      case 'error': {
        const tb = (e.traceback ?? []).join('').replace(ANSI, '') || `${e.ename ?? 'Error'}: ${e.evalue ?? ''}\n`
        return this.err(this.red(tb.endsWith('\n') ? tb : `${tb}\n`))
      }
      case 'limit':
        return this.err(this.dim(`[output limit reached: ${e.dropped_bytes ?? 0} bytes of ${e.what ?? 'output'} dropped]\n`))
      case 'status':
        if (e.state === 'queued') this.progress.start('queued behind another execution')
        else if (e.state === 'running') this.progress.start('running')
        return
      case 'done':
        if (e.status && !['ok', 'error', 'interrupted'].includes(e.status)) this.err(this.red(`[execution ended: ${e.status}]\n`))
        return
    }
  }

  /** A note for the user (not program output): stderr, dimmed. */
  note(text: string): void {
    this.err(this.dim(`${text}\n`))
  }

  private bundle(data: Record<string, unknown>): void {
    const plain = data['text/plain']
    const images = Object.keys(data).filter((t) => IMAGE.test(t))
    if (images.length) {
      const size = typeof data[images[0]!] === 'string' ? Math.round(((data[images[0]!] as string).length * 3) / 4 / 1024) : 0
      this.note(`[${images[0]} image, ${size} KiB: not shown in a terminal]`)
    } else if (typeof plain === 'string') this.out(plain.endsWith('\n') ? plain : `${plain}\n`)
    else if (Object.keys(data).length) this.note(`[${Object.keys(data).join(', ')}]`)
  }

  private out(text: string): void {
    if (!text) return
    this.progress.touch()
    this.io.out.write(text)
    this.outEndsLine = text.endsWith('\n')
  }

  private err(text: string): void {
    this.progress.touch()
    // Keep stderr from starting in the middle of an unfinished stdout line on a shared terminal.
    if (!this.outEndsLine && this.io.out.isTTY && this.io.err.isTTY) this.io.out.write('\n')
    this.outEndsLine = true
    this.io.err.write(text)
  }
}

export function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)))
  return rows
    .map(
      (r) =>
        `${r
          .map((c, i) => c.padEnd(widths[i]!))
          .join('  ')
          .trimEnd()}\n`,
    )
    .join('')
}
