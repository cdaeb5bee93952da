// An execution as an MCP tool call sees it: its output sent while it runs (progress notifications
// when the call carries a progressToken, logging notifications otherwise) and, at its end, one tool
// result: the text output in order, images as image content, a bash script's exit code, isError when it did not end ok.
import type { CallToolResult, ServerNotification } from '@modelcontextprotocol/sdk/types.js'
import type { LoggedEvent } from '../store/records.js'

type Content = CallToolResult['content'][number]

/** What a tool handler gets from the SDK to talk back while it runs. */
export interface CallChannel {
  progressToken?: string | number
  sendNotification(n: ServerNotification): Promise<void>
}

const IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp']
// Colour codes some libraries print; a model reads them as noise.
// eslint-disable-next-line no-control-regex -- colour codes start with ESC
const ANSI = /\x1b\[[0-9;]*[A-Za-z]/g

/** The text a model should read for one event ('' for none). */
function eventText(e: LoggedEvent): string {
  switch (e.type) {
    case 'stdout':
    case 'stderr':
      return typeof e.text === 'string' ? e.text : ''
    case 'result':
    case 'display': {
      const data = (e.data ?? {}) as Record<string, unknown>
      const plain = typeof data['text/plain'] === 'string' ? data['text/plain'] : ''
      // A figure's text/plain is "<Figure size ...>": the image says it better.
      if (IMAGE_TYPES.some((t) => typeof data[t] === 'string')) return ''
      return plain ? `${plain}\n` : ''
    }
    case 'error': {
      const tb = Array.isArray(e.traceback) ? (e.traceback as string[]).join('') : ''
      return (tb || `${String(e.ename)}: ${String(e.evalue)}`).replace(ANSI, '').replace(/\n?$/, '\n')
    }
    case 'limit':
      return `[output limit reached: ${Number(e.dropped_bytes ?? 0)} bytes of ${String(e.what)} dropped]\n`
    case 'final':
      return `[final answer] ${String(e.value)}\n`
    default:
      return ''
  }
}

function eventImages(e: LoggedEvent): Content[] {
  if (e.type !== 'result' && e.type !== 'display') return []
  const data = (e.data ?? {}) as Record<string, unknown>
  const out: Content[] = []
  for (const mimeType of IMAGE_TYPES) {
    const b64 = data[mimeType]
    if (typeof b64 === 'string') out.push({ type: 'image', data: b64, mimeType })
  }
  return out
}

/** Gathers an execution's events into a tool result, and relays each one's output to the client as it arrives. */
export class RunOutput {
  private text = ''
  private readonly images: Content[] = []
  private status = ''
  /** A bash execution's exit code (null: the sandbox died first); undefined for Python. */
  private exitCode: number | null | undefined
  private sent = 0

  constructor(private readonly channel: CallChannel) {}

  /** One event from the execution's log, in order. A notification that cannot be sent (client gone) is skipped. */
  async add(e: LoggedEvent): Promise<void> {
    if (e.type === 'done') {
      this.status = typeof e.status === 'string' ? e.status : 'error'
      if ('exit_code' in e) this.exitCode = typeof e.exit_code === 'number' ? e.exit_code : null
    }
    const text = eventText(e)
    const images = eventImages(e)
    this.text += text
    this.images.push(...images)
    if (!text && images.length === 0) return
    const message = text || `[${images.length} image${images.length > 1 ? 's' : ''}]`
    this.sent += 1
    const { progressToken } = this.channel
    const n: ServerNotification =
      progressToken !== undefined
        ? { method: 'notifications/progress', params: { progressToken, progress: this.sent, message } }
        : { method: 'notifications/message', params: { level: e.type === 'stderr' || e.type === 'error' ? 'warning' : 'info', logger: e.type, data: message } }
    await this.channel.sendNotification(n).catch(() => undefined)
  }

  /** The tool result; `executionId` is named so a caller can read the full log over the HTTP API. */
  result(executionId: string): CallToolResult {
    const ok = this.status === 'ok'
    const bash = this.exitCode !== undefined
    let text = this.text || (ok && !bash ? '(no output)\n' : '')
    if (bash) text += `[exit code ${this.exitCode ?? 'unknown: the sandbox died'}]\n`
    // A script that exited nonzero ended with status error: its exit code already says so.
    if (!ok && !(this.status === 'error' && typeof this.exitCode === 'number'))
      text += `[execution ${executionId} ended: ${this.status || 'without a done event'}]\n`
    return { content: [{ type: 'text', text }, ...this.images], isError: !ok }
  }
}
