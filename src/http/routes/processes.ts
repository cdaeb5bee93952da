// Background process routes: start one, list them, read one, follow its output (SSE, resumable),
// write its stdin (a raw body), signal it, kill and forget it. Those that reach the sandbox run on
// the session's holder (config.holder); the reads answer from Redis on any instance.
import type { IncomingMessage } from 'node:http'
import type { FastifyInstance, FastifyReply } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { Type, type TSchema } from 'typebox'
import { AppError } from '../../errors.js'
import { Process, ProcessList, SignalBody, StartProcessBody } from '../../schemas.js'
import type { Processes } from '../../sessions/index.js'
import { BINARY } from '../content-types.js'
import { bindRequestLog } from '../request-log.js'
import { EventId, problems, ProcessParams, ref, SessionParams } from '../schema-refs.js'
import type { SseStreams } from '../sse.js'

/** The most one POST .../stdin writes; a program that wants more gets it in several. */
const STDIN_MAX_BYTES = 1024 * 1024

const SSE_DESCRIPTION =
  'Server-Sent Events: `event:` is stdout, stderr, limit or exit, `id:` its position (send it back as Last-Event-ID), `data:` the event as JSON. Exactly one `exit` event ends the stream.'

/** Reads a raw body of at most `max` bytes; past it 413 payload_too_large (the rest is read and dropped, so the answer arrives). */
async function readBody(req: IncomingMessage, max: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length'])
  const chunks: Buffer[] = []
  let size = 0
  if (!(declared > max)) {
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length
      if (size > max) break
      chunks.push(chunk)
    }
  }
  if (size > max || declared > max) {
    let dropped = 0
    req.on('data', (chunk: Buffer) => {
      if ((dropped += chunk.length) > 16 * max) req.destroy()
    })
    req.resume()
    throw new AppError('payload_too_large', `stdin is written at most ${max} bytes at a time`)
  }
  return Buffer.concat(chunks)
}

export async function processRoutes(app: FastifyInstance, { processes, streams }: { processes: Processes; streams: SseStreams }): Promise<void> {
  const r = app.withTypeProvider<TypeBoxTypeProvider>()
  const tags = ['processes']
  const security = [{ bearer: [] }]
  const PROCESS_ERRORS = ['session_dead', 'sandbox_failed'] as const

  r.post(
    '/v1/sessions/:id/processes',
    {
      config: { holder: true },
      schema: {
        operationId: 'startProcess',
        summary: 'Start a background process: `bash -c command` in the sandbox, beside executions (neither waits for the other)',
        tags,
        security,
        params: SessionParams,
        body: ref(StartProcessBody),
        response: {
          201: { ...ref(Process), description: 'The process, running (Location names it; its output is at .../output)' },
          ...problems(...PROCESS_ERRORS, 'invalid_cwd', 'too_many_processes'),
        },
      },
    },
    async (req, reply) => {
      const p = await processes.start(req.tenant, req.params.id, req.body)
      bindRequestLog(req, { sessionId: req.params.id, processId: p.id })
      reply.code(201).header('location', `/v1/sessions/${req.params.id}/processes/${p.id}`)
      return p
    },
  )

  r.get(
    '/v1/sessions/:id/processes',
    {
      schema: {
        operationId: 'listProcesses',
        summary: "The session's background processes",
        tags,
        security,
        params: SessionParams,
        response: { 200: { ...ref(ProcessList), description: 'Running ones, and those that exited lately' } },
      },
    },
    async (req) => ({ processes: await processes.list(req.tenant, req.params.id) }),
  )

  r.get(
    '/v1/sessions/:id/processes/:pid',
    {
      schema: {
        operationId: 'getProcess',
        summary: 'One background process',
        tags,
        security,
        params: ProcessParams,
        response: { 200: { ...ref(Process), description: 'The process' } },
      },
    },
    async (req) => processes.get(req.tenant, req.params.id, req.params.pid),
  )

  r.get(
    '/v1/sessions/:id/processes/:pid/output',
    {
      sse: 'only',
      schema: {
        operationId: 'streamProcessOutput',
        summary: "A process's output from the start, or after Last-Event-ID (or ?after=), then live until it exits",
        tags,
        security,
        params: ProcessParams,
        headers: Type.Object({ 'last-event-id': Type.Optional(EventId('Resume after this event id')) }),
        querystring: Type.Object(
          { after: Type.Optional(EventId('Resume after this event id (for clients that cannot set headers)')) },
          { additionalProperties: false },
        ),
        response: {
          200: { description: SSE_DESCRIPTION, content: { 'text/event-stream': { schema: { type: 'string' } } } },
          204: {
            description: 'Nothing after the given id and the process has exited, or nothing left of its output (EventSource stops reconnecting)',
            type: 'null',
          },
        },
      },
    },
    async (req, reply) => {
      const { id: sid, pid } = req.params
      const after = req.query.after ?? req.headers['last-event-id'] ?? ''
      const p = await processes.record(req.tenant, sid, pid)
      if (p.status === 'exited' && after && (await processes.eventsAfter(sid, pid, after)) === 0) {
        reply.code(204).send(null)
        return
      }
      // A running process may write nothing for a long while: its stream opens at once.
      await streams.pipe(req, reply, (onEvent, signal) => processes.follow(sid, pid, after, onEvent, signal), { headersNow: p.status === 'running' })
      // Nothing was left to send (its output went with it, or expired): as for an exited one.
      if (!reply.raw.headersSent && !reply.sent) reply.code(204).send(null)
    },
  )

  r.post(
    '/v1/sessions/:id/processes/:pid/signal',
    {
      config: { holder: true },
      schema: {
        operationId: 'signalProcess',
        summary: "Send a signal to the process's process group",
        tags,
        security,
        params: ProcessParams,
        body: ref(SignalBody),
        response: { 204: { description: 'Sent', type: 'null' }, ...problems(...PROCESS_ERRORS, 'process_exited') },
      },
    },
    async (req, reply) => {
      await processes.signal(req.tenant, req.params.id, req.params.pid, req.body.signal)
      ;(reply as FastifyReply).code(204).send()
    },
  )

  r.delete(
    '/v1/sessions/:id/processes/:pid',
    {
      config: { holder: true },
      schema: {
        operationId: 'deleteProcess',
        summary: 'Kill the process (its whole process group) and forget it: its record and output are gone',
        tags,
        security,
        params: ProcessParams,
        response: { 204: { description: 'Killed and forgotten (answered once its processes are gone)', type: 'null' }, ...problems(...PROCESS_ERRORS) },
      },
    },
    async (req, reply) => {
      await processes.delete(req.tenant, req.params.id, req.params.pid)
      ;(reply as FastifyReply).code(204).send()
    },
  )

  // stdin lives in a context of its own, where any content type is the raw bytes to write, left
  // unread for the handler (the JSON parser and the app's body limit do not apply).
  await app.register(async (raw) => {
    raw.removeAllContentTypeParsers()
    // The body stays in req.raw; '' is what body validation sees (a binary string).
    raw.addContentTypeParser('*', (_req, _payload, done) => done(null, ''))
    raw.withTypeProvider<TypeBoxTypeProvider>().post(
      '/v1/sessions/:id/processes/:pid/stdin',
      {
        config: { holder: true },
        schema: {
          operationId: 'writeProcessStdin',
          summary: "Write the raw body to the process's stdin; ?eof=true then closes it",
          tags,
          security,
          params: ProcessParams,
          querystring: Type.Object(
            { eof: Type.Optional(Type.Boolean({ default: false, description: "Close the process's stdin after writing the body (which may be empty)" })) },
            { additionalProperties: false },
          ),
          body: {
            content: { [BINARY]: { schema: { type: 'string', format: 'binary', description: `The bytes (any content type; at most ${STDIN_MAX_BYTES})` } } },
          } as unknown as TSchema,
          response: {
            204: { description: 'Handed to the process (it reads them when it reads its stdin)', type: 'null' },
            ...problems(...PROCESS_ERRORS, 'process_exited', 'stdin_closed', 'stdin_full', 'payload_too_large'),
          },
        },
      },
      async (req, reply) => {
        const data = await readBody(req.raw, STDIN_MAX_BYTES)
        await processes.stdin(req.tenant, req.params.id, req.params.pid, data, req.query.eof ?? false)
        ;(reply as FastifyReply).code(204).send()
      },
    )
  })
}
