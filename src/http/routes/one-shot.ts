// Stateless execution and the templates it (and a session) may start from: POST /v1/execute runs
// code in a fresh sandbox and answers exactly like an execution; GET /v1/templates lists templates.
import type { FastifyInstance } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { Execution, OneShotBody, TemplateList } from '../../schemas.js'
import type { Executions, OneShots, TemplateImages } from '../../sessions/index.js'
import { replyWithExecution } from '../execution-reply.js'
import { problems, ref } from '../schema-refs.js'
import type { SseStreams } from '../sse.js'

const SSE_DESCRIPTION =
  'Server-Sent Events: `event:` is the event type, `id:` its position, `data:` the event as JSON. Exactly one `done` event ends the stream.'

export async function oneShotRoutes(
  app: FastifyInstance,
  deps: { oneShots: OneShots; executions: Executions; streams: SseStreams; templates: TemplateImages },
): Promise<void> {
  const r = app.withTypeProvider<TypeBoxTypeProvider>()
  const security = [{ bearer: [] }]

  r.post(
    '/v1/execute',
    {
      sse: 'dual',
      config: { placed: true },
      schema: {
        operationId: 'executeOnce',
        tags: ['executions'],
        security,
        body: ref(OneShotBody),
        summary:
          'Run code once in a fresh sandbox (from the warm pool), destroyed afterwards: live SSE with Accept: text/event-stream, otherwise JSON once it ends',
        response: {
          200: {
            description:
              "The execution, exactly as POST /v1/sessions/{id}/executions answers (its session_id names the one-shot's own session, gone once the reply ends).",
            content: { 'application/json': { schema: ref(Execution) }, 'text/event-stream': { schema: { type: 'string', description: SSE_DESCRIPTION } } },
          },
          ...problems(
            'limit_exceeded',
            'runtime_unavailable',
            'unknown_template',
            'invalid_path',
            'is_a_directory',
            'permission_denied',
            'workspace_full',
            'quota_exceeded',
            'sandbox_failed',
            'template_unusable',
            'capacity',
          ),
        },
      },
    },
    async (req, reply) => {
      const run = await deps.oneShots.start(req.tenant, req.body)
      // Once the reply is over (or the client gone) the sandbox may go; the execution still runs to its end first.
      if (reply.raw.destroyed) run.release()
      else reply.raw.once('close', () => run.release())
      return replyWithExecution(req, reply, deps, req.tenant, run.sessionId, run.executionId, { location: false })
    },
  )

  r.get(
    '/v1/templates',
    {
      schema: {
        operationId: 'listTemplates',
        summary: 'The sandbox templates a session or a one-shot execution may name (`template`)',
        tags: ['sessions'],
        security,
        response: { 200: { ...ref(TemplateList), description: 'Every template; the default one is used when a request names none' } },
      },
    },
    async () => ({ templates: deps.templates.list() }),
  )
}
