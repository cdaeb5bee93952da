// The one place that touches @fastify/sse's edges: every send races the client's
// disconnect (a send to a gone client can hang), open streams are ended on shutdown.
import type { FastifyReply, FastifyRequest } from 'fastify'
import { untilAborted } from '../abort.js'
import type { LoggedEvent } from '../store/records.js'

/** Why a stream's follow stops (made once: an abort without a reason builds a DOMException each time). */
const CLOSED = new Error('the SSE stream closed')
/** How long a stream's head and first events wait for more to leave with them (a status is no output). */
const FIRST_WRITE_HOLD_MS = 5

export class SseStreams {
  private readonly open = new Set<{ ac: AbortController; reply: FastifyReply }>()
  private shuttingDown = false

  /**
   * Streams `follow`'s events as SSE until it ends, the client leaves, or the server shuts down.
   * `follow` gets an onEvent callback and an abort signal. `headersNow`: the response's head goes at
   * once, not with the first event (a process may write nothing for a long while).
   */
  async pipe(
    _request: FastifyRequest,
    reply: FastifyReply,
    follow: (onEvent: (e: LoggedEvent) => Promise<void>, signal: AbortSignal) => Promise<unknown>,
    opts: { headersNow?: boolean } = {},
  ): Promise<void> {
    const sse = reply.sse
    if (opts.headersNow && !this.shuttingDown) sse.sendHeaders()
    const ac = new AbortController()
    const entry = { ac, reply }
    this.open.add(entry)
    const abort = () => ac.abort(CLOSED)
    reply.raw.on('close', abort)
    sse.onClose(abort)
    // Events sent in one turn of the event loop (output and the `done` after it, then the end of the
    // response) leave in one write: one TCP segment for the client, or for the instance relaying it.
    // A stream that opens with a `status` (no output) has its head and that status wait up to
    // FIRST_WRITE_HOLD_MS for the next event to join them: a short execution's head, status, output
    // and done then reach the client in one write. Output never waits.
    let corked = false
    let sentAny = false
    let firstHold: NodeJS.Timeout | null = null
    const uncork = () => {
      corked = false
      reply.raw.socket?.uncork()
    }
    const releaseFirst = () => {
      if (!firstHold) return
      clearTimeout(firstHold)
      firstHold = null
      process.nextTick(uncork)
    }
    try {
      if (this.shuttingDown) return
      await follow(async (e) => {
        const { id, type, seq: _seq, pos: _pos, ...payload } = e
        const socket = reply.raw.socket
        if (!corked && socket) {
          corked = true
          socket.cork()
          if (sentAny || type !== 'status') process.nextTick(uncork)
          else
            firstHold = setTimeout(() => {
              firstHold = null
              uncork()
            }, FIRST_WRITE_HOLD_MS)
        } else releaseFirst()
        sentAny = true
        await untilAborted(sse.send({ id, event: type, data: { type, ...payload } }), ac.signal)
      }, ac.signal)
    } finally {
      releaseFirst()
      reply.raw.off('close', abort)
      this.open.delete(entry)
    }
  }

  /** preClose: tells every open stream the server is going away (clients resume elsewhere with Last-Event-ID), then ends it. */
  async closeAll(): Promise<void> {
    this.shuttingDown = true
    await Promise.all(
      [...this.open].map(async ({ ac, reply }) => {
        try {
          await untilAborted(
            reply.sse.send({ event: 'shutdown', data: { reason: 'server shutting down; reconnect with Last-Event-ID' }, retry: 1000 }),
            AbortSignal.timeout(1000),
          )
        } catch {
          /* client gone */
        }
        ac.abort()
        try {
          reply.sse.close()
        } catch {
          /* already closed */
        }
      }),
    )
  }
}
