// The OpenAPI document's header (info, servers, the bearer scheme, tags) and the component schemas
// the routes refer to by $ref: with the routes' own schemas they make openapi.yaml (npm run openapi,
// drift-tested), served at GET /openapi.yaml.
import fastifySwagger from '@fastify/swagger'
import type { FastifyInstance } from 'fastify'
import type { TSchema } from 'typebox'
import * as agentSchemas from '../agent/schemas.js'
import * as schemas from '../schemas.js'
import * as snapshotSchemas from '../snapshot-schemas.js'
import { installValidation } from './validation.js'

/** The API's version: the document's, and the MCP server's. */
export const API_VERSION = '0.1.0'

/** Registered once, by their $id: bodies, answers and events refer to them. */
const COMPONENTS: TSchema[] = [
  schemas.Runtime,
  schemas.IdleAction,
  schemas.Limits,
  schemas.CreateSessionBody,
  schemas.Session,
  schemas.SessionList,
  snapshotSchemas.CreateSnapshotBody,
  snapshotSchemas.Snapshot,
  snapshotSchemas.SnapshotList,
  snapshotSchemas.ForkBody,
  snapshotSchemas.ForkResult,
  schemas.ExecuteBody,
  schemas.OneShotBody,
  schemas.TemplateList,
  schemas.FileEntry,
  schemas.FileList,
  schemas.DoneStatus,
  schemas.ExecutionStatus,
  schemas.EventType,
  schemas.Event,
  schemas.Execution,
  schemas.StartProcessBody,
  schemas.Process,
  schemas.ProcessList,
  schemas.SignalBody,
  schemas.Problem,
  agentSchemas.MessageRequest,
  agentSchemas.Message,
  agentSchemas.MessageList,
]

/** Registers the OpenAPI document and the component schemas (with their validators, validation.ts). */
export async function installOpenApi(app: FastifyInstance): Promise<void> {
  await app.register(fastifySwagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'replcast',
        version: API_VERSION,
        description:
          'Code execution for LLM agents: one locked-down, network-less Docker sandbox with a long-lived Python REPL per session; output streamed live as Server-Sent Events.',
        license: { name: 'MIT', identifier: 'MIT' },
      },
      servers: [{ url: 'http://127.0.0.1:8080', description: 'Local default' }],
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'An API key from REPLCAST_API_KEYS' } } },
      tags: [
        { name: 'sessions', description: 'Sessions: one sandbox and Python REPL each' },
        { name: 'snapshots', description: "Copies of a session's state: snapshots kept until deleted, sessions started from them, forks" },
        { name: 'executions', description: 'Running code and reading its output' },
        { name: 'files', description: "Files in a session's /workspace, streamed both ways" },
        { name: 'processes', description: 'Background processes in a session: programs that keep running beside its executions' },
        { name: 'terminal', description: "An interactive terminal in a session's sandbox, over a WebSocket" },
        { name: 'messages', description: 'LLM turns: a model writes the code, the session runs it as it streams' },
        { name: 'operations', description: 'Health, readiness, metrics' },
        { name: 'playground', description: 'A page to try the API in a browser' },
      ],
    },
    refResolver: { buildLocalReference: (json, _base, _fragment, i) => String((json as { $id?: string }).$id ?? `def-${i}`) },
  })
  installValidation(app, COMPONENTS)
}
