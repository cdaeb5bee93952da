// How a request that started an execution (code or an LLM turn) is answered: SSE of its events
// when the client asked for text/event-stream, else the whole execution as JSON once it ends.
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { ExecutionT } from '../schemas.js'
import type { Executions } from '../sessions/index.js'
import type { SseStreams } from './sse.js'

export async function replyWithExecution(
  req: FastifyRequest,
  reply: FastifyReply,
  deps: { executions: Executions; streams: SseStreams },
  tenant: string,
  sid: string,
  eid: string,
): Promise<ExecutionT | undefined> {
  req.log = req.log.child({ sessionId: sid, executionId: eid })
  reply.header('location', `/v1/sessions/${sid}/executions/${eid}`)
  if (reply.sse) {
    await deps.streams.pipe(req, reply, (onEvent, signal) => deps.executions.follow(sid, eid, '', onEvent, signal))
    return undefined
  }
  return deps.executions.wait(tenant, sid, eid, closeSignal(reply))
}

/** Aborts when the client's connection closes (the response's close; the request's fires after its body). */
function closeSignal(reply: FastifyReply): AbortSignal {
  const ac = new AbortController()
  reply.raw.once('close', () => ac.abort())
  return ac.signal
}
