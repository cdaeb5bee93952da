// LLM turn routes: POST a message (SSE live, or JSON once the turn ends), GET the history.
import type { FastifyInstance } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { Execution } from '../../schemas.js'
import type { Executions } from '../../sessions/index.js'
import type { LlmService } from '../../agent/llm-service.js'
import { MessageList, MessageRequest } from '../../agent/schemas.js'
import type { SseStreams } from '../sse.js'
import { replyWithExecution } from '../execution-reply.js'
import { problems, ref, SessionParams } from '../schema-refs.js'

const SSE_DESCRIPTION =
  'Server-Sent Events of the turn: `code` deltas as the model writes, the outputs of each statement as it runs, `error`s and corrections, `llm_call`, `final` (agent mode) and exactly one `done`. `id:` is the resumable position (Last-Event-ID on GET .../executions/{eid}/events).'

export async function messageRoutes(
  app: FastifyInstance,
  { executions, streams, llm }: { executions: Executions; streams: SseStreams; llm: LlmService },
): Promise<void> {
  const r = app.withTypeProvider<TypeBoxTypeProvider>()
  const tags = ['messages']
  const security = [{ bearer: [] }]
  app.addHook('onClose', async () => {
    llm.close()
  })

  r.post(
    '/v1/sessions/:id/messages',
    {
      sse: 'dual',
      config: { holder: true },
      schema: {
        operationId: 'sendMessage',
        tags,
        security,
        params: SessionParams,
        body: ref(MessageRequest),
        summary: 'An LLM turn: the model answers in Python that runs in the session as it streams',
        description:
          "Needs OPENAI_BASE_URL. With Accept: text/event-stream the turn's events stream live; otherwise the turn is returned as an Execution once it ends. The Location header names the turn's execution (resume with GET .../executions/{eid}/events; interrupt with POST .../interrupt).",
        response: {
          200: {
            description: 'The turn as an execution',
            content: { 'application/json': { schema: ref(Execution) }, 'text/event-stream': { schema: { type: 'string', description: SSE_DESCRIPTION } } },
          },
          ...problems(
            'limit_exceeded',
            'model_not_allowed',
            'session_dead',
            'queue_full',
            'quota_exceeded',
            'sandbox_failed',
            'llm_not_configured',
            'llm_budget_exhausted',
          ),
        },
      },
    },
    async (req, reply) => {
      const sid = req.params.id
      const eid = await llm.startTurn(req.tenant, sid, req.body)
      if (req.body.on_disconnect === 'cancel') reply.raw.once('close', () => llm.cancel(eid, 'the client disconnected (on_disconnect: cancel)'))
      return replyWithExecution(req, reply, { executions, streams }, req.tenant, sid, eid)
    },
  )

  r.get(
    '/v1/sessions/:id/messages',
    {
      schema: {
        operationId: 'listMessages',
        tags,
        security,
        params: SessionParams,
        summary: "The session's conversation: user messages and the code the model ran, with truncated outputs",
        querystring: Type.Object(
          { limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50, description: 'Newest messages to return' })) },
          { additionalProperties: false },
        ),
        response: { 200: { ...ref(MessageList), description: 'Messages, oldest first' } },
      },
    },
    async (req) => ({ messages: await llm.messages(req.tenant, req.params.id, req.query.limit ?? 50) }),
  )
}
