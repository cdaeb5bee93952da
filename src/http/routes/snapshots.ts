// Snapshot routes: take one of a session, list, get, delete; and fork a session into copies.
// A new session from a snapshot is POST /v1/sessions {snapshot_id} (sessions.ts).
import type { FastifyInstance } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { CreateSnapshotBody, ForkBody, ForkResult, Snapshot, SnapshotList } from '../../snapshot-schemas.js'
import type { Snapshots } from '../../sessions/index.js'
import { PAGE_SIZE, PageQuery, problems, ref, SessionParams, SnapshotParams } from '../schema-refs.js'
import { bindRequestLog } from '../request-log.js'

export async function snapshotRoutes(app: FastifyInstance, { snapshots }: { snapshots: Snapshots }): Promise<void> {
  const r = app.withTypeProvider<TypeBoxTypeProvider>()
  const tags = ['snapshots']
  const security = [{ bearer: [] }]
  // What copying a session's state can end in (a copy is a hibernation and a wake: snapshots.ts).
  const copyProblems = ['session_dead', 'session_busy', 'not_supported', 'quota_exceeded', 'sandbox_failed', 'checkpoint_space', 'capacity'] as const

  r.post(
    '/v1/sessions/:id/snapshots',
    {
      preValidation: async (req) => {
        if (req.body === undefined) req.body = {}
      },
      config: { holder: true },
      schema: {
        operationId: 'createSnapshot',
        summary: "Snapshot the session's state (memory, workspace files, processes); the session runs on",
        description:
          'The session pauses while its sandbox is checkpointed and restored (runsc cannot checkpoint a sandbox and leave it running); requests meanwhile wait. A hibernated session is woken first. A busy session answers 409 session_busy.',
        tags,
        security,
        params: SessionParams,
        body: ref(CreateSnapshotBody),
        response: { 201: { ...ref(Snapshot), description: 'The snapshot' }, ...problems(...copyProblems) },
      },
    },
    async (req, reply) => {
      bindRequestLog(req, { sessionId: req.params.id })
      const s = await snapshots.take(req.tenant, req.params.id, req.body?.name ?? '')
      reply.code(201).header('location', `/v1/snapshots/${s.id}`)
      return s
    },
  )

  r.post(
    '/v1/sessions/:id/fork',
    {
      preValidation: async (req) => {
        if (req.body === undefined) req.body = {}
      },
      config: { holder: true },
      schema: {
        operationId: 'forkSession',
        summary: "New sessions, each with the session's state now, independent afterwards; the session runs on",
        description: 'All or nothing: when one copy cannot be made (max_sessions, a failed restore), none is left.',
        tags,
        security,
        params: SessionParams,
        body: ref(ForkBody),
        response: { 201: { ...ref(ForkResult), description: 'The new sessions' }, ...problems(...copyProblems, 'snapshot_refused') },
      },
    },
    async (req, reply) => {
      bindRequestLog(req, { sessionId: req.params.id })
      reply.code(201)
      // The client's key goes with the copies woken on other engines: the instances there authenticate it.
      return { sessions: await snapshots.fork(req.tenant, req.params.id, req.body ?? {}, req.headers.authorization) }
    },
  )

  r.get(
    '/v1/snapshots',
    {
      schema: {
        operationId: 'listSnapshots',
        summary: "List the tenant's snapshots",
        tags,
        security,
        querystring: PageQuery,
        response: { 200: { ...ref(SnapshotList), description: 'A page of snapshots' } },
      },
    },
    async (req) => snapshots.list(req.tenant, req.query.limit ?? PAGE_SIZE, req.query.cursor),
  )

  r.get(
    '/v1/snapshots/:id',
    {
      schema: {
        operationId: 'getSnapshot',
        summary: 'Get a snapshot',
        tags,
        security,
        params: SnapshotParams,
        response: { 200: { ...ref(Snapshot), description: 'The snapshot' }, ...problems('snapshot_not_found') },
      },
    },
    async (req) => snapshots.get(req.tenant, req.params.id),
  )

  r.delete(
    '/v1/snapshots/:id',
    {
      schema: {
        operationId: 'deleteSnapshot',
        summary: 'Delete a snapshot and its checkpoint',
        tags,
        security,
        params: SnapshotParams,
        response: { 204: { description: 'Deleted; its files are gone', type: 'null' }, ...problems('snapshot_not_found') },
      },
    },
    async (req, reply) => {
      await snapshots.delete(req.tenant, req.params.id)
      reply.code(204).send(null)
    },
  )
}
