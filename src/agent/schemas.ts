// Request and response shapes of LLM turns (POST/GET /v1/sessions/{id}/messages). Registered
// as OpenAPI components in app.ts; ceilings come from limits.ts.
import { Type, type Static } from 'typebox'
import { ref } from '../schemas.js'
import {
  DEFAULT_HISTORY_LENGTH,
  DEFAULT_MAX_ATTEMPTS,
  DEFAULT_MAX_STEPS,
  DEFAULT_MODEL_TIMEOUT_S,
  DEFAULT_OUTPUT_CHARS,
  DEFAULT_SUB_CALL_BUDGET,
  DEFAULT_TURN_TIMEOUT_S,
  MAX_ATTEMPTS_CEILING,
  MAX_HISTORY_LENGTH_CEILING,
  MAX_MODEL_TIMEOUT_S,
  MAX_OUTPUT_CHARS_CEILING,
  MAX_STEPS_CEILING,
  SUB_CALL_CEILINGS,
} from './limits.js'

const d = DEFAULT_SUB_CALL_BUDGET
const c = SUB_CALL_CEILINGS

const LlmBudget = Type.Object(
  {
    max_calls: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: c.max_calls,
        description: `Prompts sandbox code may send with llm_query/llm_batch in this turn (default ${d.max_calls})`,
      }),
    ),
    max_concurrency: Type.Optional(
      Type.Integer({ minimum: 1, maximum: c.max_concurrency, description: `Prompts in flight at once; more wait (default ${d.max_concurrency})` }),
    ),
    timeout_s: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: c.timeout_s, description: `Seconds one prompt may take (default ${d.timeout_s})` })),
    max_tokens: Type.Optional(
      Type.Integer({ minimum: 0, maximum: c.max_tokens, description: `Tokens (prompt + completion) all sub-calls may use (default ${d.max_tokens})` }),
    ),
  },
  {
    additionalProperties: false,
    description: 'Budgets of llm_query/llm_batch calls made by sandbox code during the turn; exhausting one raises LLMError in the sandbox',
  },
)

export const MessageRequest = Type.Object(
  {
    content: Type.String({ minLength: 1, maxLength: 200_000, description: "The user's message" }),
    mode: Type.Optional(
      Type.Union([Type.Literal('stream'), Type.Literal('agent')], {
        description:
          'stream (default): the model answers in Python that runs statement by statement as it streams, self-correcting after errors. agent: recursive-LM loop over `context` until FINAL().',
      }),
    ),
    context: Type.Optional(
      Type.Union([Type.String(), Type.Array(Type.Unknown()), Type.Object({})], {
        description: 'agent mode: data placed in the REPL as the variable `context` (a string, list or object; never put in the prompt)',
      }),
    ),
    model: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'Model name; must be REPLCAST_MODEL or on REPLCAST_MODELS' })),
    max_steps: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: MAX_STEPS_CEILING,
        description: `agent mode: model steps before giving up without FINAL (default ${DEFAULT_MAX_STEPS})`,
      }),
    ),
    max_attempts: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: MAX_ATTEMPTS_CEILING,
        description: `stream mode: tries including self-corrections after an error (default ${DEFAULT_MAX_ATTEMPTS})`,
      }),
    ),
    output_chars: Type.Optional(
      Type.Integer({
        minimum: 100,
        maximum: MAX_OUTPUT_CHARS_CEILING,
        description: `Characters of a step's output or traceback shown to the model (default ${DEFAULT_OUTPUT_CHARS})`,
      }),
    ),
    timeout_s: Type.Optional(
      Type.Number({ exclusiveMinimum: 0, description: `Wall-clock limit of the whole turn (default ${DEFAULT_TURN_TIMEOUT_S}; at most MAX_EXEC_TIMEOUT_S)` }),
    ),
    model_timeout_s: Type.Optional(
      Type.Number({
        exclusiveMinimum: 0,
        maximum: MAX_MODEL_TIMEOUT_S,
        description: `The model call fails when it sends nothing for this long (default ${DEFAULT_MODEL_TIMEOUT_S})`,
      }),
    ),
    max_history_length: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: MAX_HISTORY_LENGTH_CEILING,
        description: `Earlier messages of this session given to the model (default ${DEFAULT_HISTORY_LENGTH})`,
      }),
    ),
    include_outputs: Type.Optional(
      Type.Boolean({ description: "Whether earlier turns' outputs (truncated) are given to the model with their code (default true)" }),
    ),
    llm_budget: Type.Optional(LlmBudget),
    on_disconnect: Type.Optional(
      Type.Union([Type.Literal('continue'), Type.Literal('cancel')], {
        description:
          'continue (default): the turn runs on when the client goes away and can be resumed via the Location header; cancel: it is interrupted and ends with an error event',
      }),
    ),
  },
  {
    $id: 'MessageRequest',
    additionalProperties: false,
    // In the schema, not the handler, so openapi.yaml says it too (problem-handler.ts words the error from `then`).
    if: { required: ['context'], properties: { context: {} } },
    then: { required: ['mode'], properties: { mode: { const: 'agent' } }, description: 'context is only used in agent mode (mode: "agent")' },
  },
)

export const Message = Type.Object(
  {
    role: Type.Union([Type.Literal('user'), Type.Literal('assistant')]),
    content: Type.String({ description: 'user: the message; assistant: the code the model wrote (what ran)' }),
    mode: Type.Union([Type.Literal('stream'), Type.Literal('agent')]),
    turn_id: Type.String({ description: "The turn's execution id: its events are at /v1/sessions/{id}/executions/{turn_id}" }),
    created_at: Type.String({ format: 'date-time' }),
    output: Type.Optional(Type.String({ description: 'assistant: what the code printed (truncated)' })),
    final: Type.Optional(Type.String({ description: 'assistant, agent mode: the final answer' })),
    status: Type.Optional(Type.String({ description: 'assistant: how the turn ended (a done status)' })),
    model: Type.Optional(Type.String()),
  },
  { $id: 'Message' },
)

export const MessageList = Type.Object(
  {
    messages: Type.Array(ref(Message), { description: 'Oldest first' }),
  },
  { $id: 'MessageList' },
)

export type MessageRequestT = Static<typeof MessageRequest>
export type MessageT = Static<typeof Message>
