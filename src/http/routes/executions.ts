// Execution routes: run code (SSE live, or JSON when done), read an execution, resume its events.
import type { FastifyInstance } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { ExecuteBody, Execution } from '../../schemas.js'
import type { Executions } from '../../sessions/index.js'
import type { SseStreams } from '../sse.js'
import { sendExecution } from '../execution-json.js'
import { replyWithExecution } from '../execution-reply.js'
import { mintStreamToken, STREAM_TOKEN_TTL_S } from '../stream-token.js'
import { EventId, ExecutionParams, problems, ref, SessionParams } from '../schema-refs.js'

const SSE_DESCRIPTION =
  'Server-Sent Events: `event:` is the event type, `id:` its position (send it back as Last-Event-ID), `data:` the event as JSON. Exactly one `done` event ends the stream.'

export async function executionRoutes(
  app: FastifyInstance,
  { executions, streams, secret }: { executions: Executions; streams: SseStreams; secret: () => Promise<string> },
): Promise<void> {
  const r = app.withTypeProvider<TypeBoxTypeProvider>()
  const tags = ['executions']
  const security = [{ bearer: [] }]

  r.post(
    '/v1/sessions/:id/executions',
    {
      sse: 'dual',
      config: { holder: true },
      schema: {
        operationId: 'execute',
        tags,
        security,
        params: SessionParams,
        body: ref(ExecuteBody),
        summary: 'Run code in the session: live SSE with Accept: text/event-stream, otherwise JSON once it ends',
        response: {
          200: {
            description: 'The execution. With Accept: text/event-stream its events stream live as they happen. The Location header names the execution.',
            content: { 'application/json': { schema: ref(Execution) }, 'text/event-stream': { schema: { type: 'string', description: SSE_DESCRIPTION } } },
          },
          ...problems('limit_exceeded', 'session_dead', 'queue_full', 'quota_exceeded', 'sandbox_failed'),
        },
      },
    },
    async (req, reply) => {
      const sid = req.params.id
      const eid = await executions.submit(req.tenant, sid, { code: req.body.code, timeoutS: req.body.timeout_s, language: req.body.language })
      return replyWithExecution(req, reply, { executions, streams }, req.tenant, sid, eid)
    },
  )

  r.get(
    '/v1/sessions/:id/executions/:eid',
    {
      schema: {
        operationId: 'getExecution',
        summary: 'An execution with every event so far',
        tags,
        security,
        params: ExecutionParams,
        response: { 200: { ...ref(Execution), description: 'The execution' } },
      },
    },
    async (req, reply) => sendExecution(reply, await executions.read(req.tenant, req.params.id, req.params.eid)),
  )

  r.get(
    '/v1/sessions/:id/executions/:eid/events',
    {
      sse: 'only',
      schema: {
        operationId: 'streamExecutionEvents',
        tags,
        security,
        params: ExecutionParams,
        summary: "Replay an execution's events after Last-Event-ID (or ?after=), then follow it live until done",
        headers: Type.Object({ 'last-event-id': Type.Optional(EventId('Resume after this event id')) }),
        querystring: Type.Object(
          {
            after: Type.Optional(EventId('Resume after this event id (for clients that cannot set headers)')),
            access_token: Type.Optional(
              Type.String({ description: "A token from POST .../events-token, for browsers' EventSource (instead of the Authorization header)" }),
            ),
          },
          { additionalProperties: false },
        ),
        response: {
          200: { description: SSE_DESCRIPTION, content: { 'text/event-stream': { schema: { type: 'string' } } } },
          204: {
            description:
              'Nothing after the given id, or nothing left of its log (expired, or gone with its session): the execution has ended (EventSource stops reconnecting)',
            type: 'null',
          },
        },
      },
    },
    async (req, reply) => {
      const { id: sid, eid } = req.params
      const after = req.query.after ?? req.headers['last-event-id'] ?? ''
      const ex = await executions.record(req.tenant, sid, eid)
      const ended = ex.status !== 'queued' && ex.status !== 'running'
      if (ended && after && (await executions.eventsAfter(sid, eid, after)) === 0) {
        reply.code(204).send(null)
        return
      }
      await streams.pipe(req, reply, (onEvent, signal) => executions.follow(sid, eid, after, onEvent, signal))
      // Nothing was left to send (the log went with its session meanwhile, or expired): as for an ended one.
      if (!reply.raw.headersSent && !reply.sent) reply.code(204).send(null)
    },
  )

  r.post(
    '/v1/sessions/:id/executions/:eid/events-token',
    {
      schema: {
        operationId: 'createEventsToken',
        tags,
        security,
        params: ExecutionParams,
        summary: "A short-lived token that lets a browser's EventSource read this execution's events (?access_token=)",
        response: {
          201: { description: 'The token', ...Type.Object({ token: Type.String(), expires_at: Type.String({ format: 'date-time' }) }) },
        },
      },
    },
    async (req, reply) => {
      const { id: sid, eid } = req.params
      await executions.record(req.tenant, sid, eid)
      const exp = Math.floor(Date.now() / 1000) + STREAM_TOKEN_TTL_S
      reply.code(201)
      return { token: mintStreamToken(await secret(), { tenant: req.tenant, sid, eid, exp }), expires_at: new Date(exp * 1000).toISOString() }
    },
  )
}
