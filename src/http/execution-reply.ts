// How a request that started an execution (code or an LLM turn) is answered: SSE of its events
// when the client asked for text/event-stream, else the whole execution as JSON once it ends.
import type { FastifyReply, FastifyRequest } from 'fastify'
import { AppError } from '../errors.js'
import type { Executions } from '../sessions/index.js'
import { sendExecution } from './execution-json.js'
import type { SseStreams } from './sse.js'
import { bindRequestLog } from './request-log.js'

export async function replyWithExecution(
  req: FastifyRequest,
  reply: FastifyReply,
  deps: { executions: Executions; streams: SseStreams },
  tenant: string,
  sid: string,
  eid: string,
  /** location: false for an execution whose session goes when it ends (a one-shot): it would name nothing. */
  opts: { location?: boolean } = {},
): Promise<FastifyReply | undefined> {
  bindRequestLog(req, { sessionId: sid, executionId: eid })
  if (opts.location !== false) reply.header('location', `/v1/sessions/${sid}/executions/${eid}`)
  if (reply.sse) {
    await deps.streams.pipe(req, reply, (onEvent, signal) => deps.executions.follow(sid, eid, '', onEvent, signal))
    if (reply.raw.headersSent || reply.raw.destroyed) return undefined
    // Nothing to stream (its log went with its session before the first event was read): never an empty 200.
    const sessionGone = await deps.executions.record(tenant, sid, eid).then(
      () => false,
      (err: unknown) => err instanceof AppError && err.code === 'session_not_found',
    )
    if (sessionGone && opts.location !== false) throw new AppError('session_not_found', `session ${sid} was deleted before execution ${eid} could be streamed`)
    throw new AppError('unavailable', `the events of execution ${eid} could not be read`, { headers: { 'retry-after': '1' } })
  }
  // Streamed from Redis page by page once it has ended (never gathered in memory).
  await deps.executions.waitForEnd(sid, eid, closeSignal(reply))
  return sendExecution(reply, await deps.executions.read(tenant, sid, eid))
}

/** Aborts when the client's connection closes (the response's close; the request's fires after its body). */
function closeSignal(reply: FastifyReply): AbortSignal {
  const ac = new AbortController()
  reply.raw.once('close', () => ac.abort())
  return ac.signal
}
