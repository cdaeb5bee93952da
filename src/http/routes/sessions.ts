// Session routes: create, list, get, delete, interrupt, restart.
import type { FastifyInstance } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { CreateSessionBody, Session, SessionList } from '../../schemas.js'
import type { Executions, SessionService } from '../../sessions/index.js'
import { problems, ref, SessionParams } from '../schema-refs.js'

export async function sessionRoutes(app: FastifyInstance, { sessions, executions }: { sessions: SessionService; executions: Executions }): Promise<void> {
  const r = app.withTypeProvider<TypeBoxTypeProvider>()
  const tags = ['sessions']
  const security = [{ bearer: [] }]

  r.post(
    '/v1/sessions',
    {
      // A POST with no body at all creates a session with every default.
      preValidation: async (req) => {
        if (req.body === undefined) req.body = {}
      },
      schema: {
        operationId: 'createSession',
        summary: 'Create a session (a new sandbox with a fresh Python REPL)',
        tags,
        security,
        body: ref(CreateSessionBody),
        response: {
          201: { ...ref(Session), description: 'The session, ready for code' },
          ...problems(
            'validation_failed',
            'bad_request',
            'limit_exceeded',
            'runtime_unavailable',
            'quota_exceeded',
            'payload_too_large',
            'unsupported_media_type',
            'sandbox_failed',
          ),
        },
      },
    },
    async (req, reply) => {
      const s = await sessions.create(req.tenant, req.body ?? {})
      req.log = req.log.child({ sessionId: s.id })
      reply.code(201).header('location', `/v1/sessions/${s.id}`)
      return s
    },
  )

  r.get(
    '/v1/sessions',
    {
      schema: {
        operationId: 'listSessions',
        summary: "List the tenant's sessions",
        tags,
        security,
        querystring: Type.Object(
          {
            limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
            cursor: Type.Optional(Type.String({ maxLength: 64, description: 'next_cursor of the previous page' })),
          },
          { additionalProperties: false },
        ),
        response: { 200: { ...ref(SessionList), description: 'A page of sessions' }, ...problems('validation_failed') },
      },
    },
    async (req) => sessions.list(req.tenant, req.query.limit ?? 50, req.query.cursor),
  )

  r.get(
    '/v1/sessions/:id',
    {
      schema: {
        operationId: 'getSession',
        summary: 'Get a session',
        tags,
        security,
        params: SessionParams,
        response: { 200: { ...ref(Session), description: 'The session' }, ...problems('session_not_found') },
      },
    },
    async (req) => sessions.get(req.tenant, req.params.id),
  )

  r.delete(
    '/v1/sessions/:id',
    {
      schema: {
        operationId: 'deleteSession',
        summary: 'Delete a session and its sandbox',
        tags,
        security,
        params: SessionParams,
        response: { 204: { description: 'Deleted; the container is gone', type: 'null' }, ...problems('session_not_found') },
      },
    },
    async (req, reply) => {
      await sessions.delete(req.tenant, req.params.id)
      reply.code(204).send(null)
    },
  )

  r.post(
    '/v1/sessions/:id/interrupt',
    {
      schema: {
        operationId: 'interruptSession',
        summary: 'Interrupt the running execution (KeyboardInterrupt; state is kept)',
        tags,
        security,
        params: SessionParams,
        response: {
          202: { description: 'Interrupt sent; the execution ends with done.status interrupted, or the sandbox is killed after a grace period', type: 'null' },
          ...problems('session_not_found', 'nothing_running', 'session_elsewhere'),
        },
      },
    },
    async (req, reply) => {
      await executions.interrupt(req.tenant, req.params.id)
      reply.code(202).send(null)
    },
  )

  r.post(
    '/v1/sessions/:id/restart',
    {
      schema: {
        operationId: 'restartSession',
        summary: 'Restart the session with a fresh interpreter and workspace (same id)',
        tags,
        security,
        params: SessionParams,
        response: { 200: { ...ref(Session), description: 'The restarted session' }, ...problems('session_not_found', 'session_elsewhere', 'sandbox_failed') },
      },
    },
    async (req) => sessions.restart(req.tenant, req.params.id),
  )
}
