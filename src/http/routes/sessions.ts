// Session routes: create (from a snapshot too), list, get, delete, interrupt, restart, hibernate, wake.
import type { FastifyInstance, FastifyReply } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { CreateSessionBody, Session, SessionList } from '../../schemas.js'
import type { Executions, SessionService, Snapshots } from '../../sessions/index.js'
import { PAGE_SIZE, PageQuery, problems, ref, SessionParams } from '../schema-refs.js'
import { bindRequestLog } from '../request-log.js'

export async function sessionRoutes(
  app: FastifyInstance,
  { sessions, executions, snapshots }: { sessions: SessionService; executions: Executions; snapshots: Snapshots },
): Promise<void> {
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
      config: { placed: true },
      schema: {
        operationId: 'createSession',
        summary: 'Create a session (a new sandbox with a fresh Python REPL)',
        tags,
        security,
        body: ref(CreateSessionBody),
        response: {
          201: { ...ref(Session), description: 'The session, ready for code' },
          ...problems(
            'bad_request',
            'limit_exceeded',
            'runtime_unavailable',
            'snapshot_not_found',
            'snapshot_refused',
            'session_dead',
            'unknown_template',
            'not_supported',
            'quota_exceeded',
            'sandbox_failed',
            'template_unusable',
            'capacity',
          ),
        },
      },
    },
    async (req, reply) => {
      const body = req.body ?? {}
      const s = body.snapshot_id ? await snapshots.createSession(req.tenant, body) : await sessions.create(req.tenant, body)
      bindRequestLog(req, { sessionId: s.id })
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
        querystring: PageQuery,
        response: { 200: { ...ref(SessionList), description: 'A page of sessions' } },
      },
    },
    async (req) => sessions.list(req.tenant, req.query.limit ?? PAGE_SIZE, req.query.cursor),
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
        response: { 200: { ...ref(Session), description: 'The session' } },
      },
    },
    async (req) => sessions.get(req.tenant, req.params.id),
  )

  r.delete(
    '/v1/sessions/:id',
    {
      config: { holder: true },
      schema: {
        operationId: 'deleteSession',
        summary: 'Delete a session and its sandbox',
        tags,
        security,
        params: SessionParams,
        response: { 204: { description: 'Deleted; the container is gone', type: 'null' } },
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
      config: { holder: true },
      schema: {
        operationId: 'interruptSession',
        summary: 'Interrupt the running execution (KeyboardInterrupt; state is kept)',
        tags,
        security,
        params: SessionParams,
        response: {
          202: { description: 'Interrupt sent; the execution ends with done.status interrupted, or the sandbox is killed after a grace period', type: 'null' },
          ...problems('nothing_running', 'sandbox_failed'),
        },
      },
    },
    async (req, reply) => {
      await executions.interrupt(req.tenant, req.params.id)
      // No body at all (send(null) would write "null"): openapi.yaml documents none.
      ;(reply as FastifyReply).code(202).send()
    },
  )

  r.post(
    '/v1/sessions/:id/restart',
    {
      config: { holder: true },
      schema: {
        operationId: 'restartSession',
        summary: 'Restart the session with a fresh interpreter and workspace (same id)',
        description:
          'Concurrent restarts of one session run one after the other: each waits for the one before it, then restarts again, and answers with the session as its own restart left it.',
        tags,
        security,
        params: SessionParams,
        response: {
          200: { ...ref(Session), description: 'The restarted session' },
          ...problems('session_dead', 'quota_exceeded', 'sandbox_failed', 'capacity'),
        },
      },
    },
    async (req) => sessions.restart(req.tenant, req.params.id),
  )

  r.post(
    '/v1/sessions/:id/hibernate',
    {
      config: { holder: true },
      schema: {
        operationId: 'hibernateSession',
        summary: 'Hibernate the session: its state to disk, its sandbox gone (no memory, no process) until it is used again',
        description:
          'Any later use (an execution, files, a process, a terminal, a message, POST .../wake) restores it first, with its state as it was. Hibernating a hibernated session changes nothing.',
        tags,
        security,
        params: SessionParams,
        response: {
          200: { ...ref(Session), description: 'The session, hibernated' },
          ...problems('session_dead', 'session_busy', 'not_supported', 'quota_exceeded', 'sandbox_failed', 'checkpoint_space'),
        },
      },
    },
    async (req) => sessions.hibernate(req.tenant, req.params.id),
  )

  r.post(
    '/v1/sessions/:id/wake',
    {
      config: { holder: true },
      schema: {
        operationId: 'wakeSession',
        summary: 'Wake a hibernated session now, ahead of its use (a live session is answered as it is)',
        tags,
        security,
        params: SessionParams,
        response: {
          200: { ...ref(Session), description: 'The session, ready' },
          ...problems('session_dead', 'quota_exceeded', 'sandbox_failed', 'capacity'),
        },
      },
    },
    async (req) => sessions.wake(req.tenant, req.params.id),
  )
}
