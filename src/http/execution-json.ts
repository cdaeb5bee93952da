// The JSON form of an execution, written as a stream page by page: one read of a large log holds one
// page of events in memory, never the whole log. The bytes are those the route's schema would make.
import { Readable } from 'node:stream'
import type { FastifyReply } from 'fastify'
import type { ExecutionRead } from '../sessions/index.js'

// Constant objects: Fastify caches a compiled serializer per schema object.
const EXECUTION = { $ref: 'Execution#' }
const EVENT = { $ref: 'Event#' }
/** How the execution with no events ends, in the schema's order of properties (events last). */
const NO_EVENTS = '"events":[]}'

export function sendExecution(reply: FastifyReply, read: ExecutionRead): FastifyReply {
  const head = reply.compileSerializationSchema(EXECUTION)(read.execution)
  const event = reply.compileSerializationSchema(EVENT)
  if (!head.endsWith(NO_EVENTS)) throw new Error('the Execution schema must list events last')
  async function* body(): AsyncGenerator<string> {
    yield head.slice(0, -2)
    let sep = ''
    for await (const page of read.pages()) {
      let chunk = ''
      for (const e of page) {
        chunk += sep + event(e)
        sep = ','
      }
      yield chunk
    }
    yield ']}'
  }
  return reply.type('application/json; charset=utf-8').send(Readable.from(body(), { objectMode: false }))
}
