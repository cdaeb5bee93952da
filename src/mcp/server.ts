// One MCP server for one HTTP request (the transport runs stateless, so any instance answers any
// call): the tools of tools.ts bound to the caller's tenant, their input schemas handed to the SDK.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import type { Logger } from 'pino'
import { z } from 'zod'
import type { Executions, OneShots, Processes, SessionFiles, SessionService, Snapshots } from '../sessions/index.js'
import { TOOLS, toolError, type ToolDef } from './tools.js'

export interface McpDeps {
  sessions: SessionService
  executions: Executions
  files: SessionFiles
  oneShots: OneShots
  processes: Processes
  snapshots: Snapshots
  version: string
}

const INSTRUCTIONS =
  'replcast runs Python in sandboxed sessions. Call create_session once, then run_python with its session_id as often as needed: ' +
  'state (variables, imports, files in /workspace) is kept between calls; run_bash runs shell commands, start_process starts programs that keep running (read_process_output, stop_process) and the file tools move files in the same session. ' +
  'Call delete_session when done. For a single run that needs no state, execute runs code once in a fresh sandbox.'

/**
 * The SDK takes zod schemas: each tool's JSON Schema (TypeBox) converted once, from a plain copy so no
 * TypeBox markers ride along, and without the API components' $ids (nested, they would re-base $refs).
 */
const inputSchema = (def: ToolDef) =>
  z.fromJSONSchema(JSON.parse(JSON.stringify(def.input), (k, v: unknown) => (k === '$id' ? undefined : v)) as Parameters<typeof z.fromJSONSchema>[0])
const INPUTS = new Map(TOOLS.map((def) => [def, inputSchema(def)]))

export function createMcpServer(deps: McpDeps, tenant: string, log: Logger, authorization?: string): McpServer {
  const server = new McpServer({ name: 'replcast', version: deps.version }, { capabilities: { logging: {} }, instructions: INSTRUCTIONS })
  for (const def of TOOLS) {
    const { name, title, description, annotations } = def
    server.registerTool(name, { title, description, annotations, inputSchema: INPUTS.get(def) }, async (args, extra) => {
      const toolLog = log.child({ tool: name })
      const ctx = {
        tenant,
        sessions: deps.sessions,
        executions: deps.executions,
        files: deps.files,
        oneShots: deps.oneShots,
        processes: deps.processes,
        snapshots: deps.snapshots,
        authorization,
        log: toolLog,
        call: { progressToken: extra._meta?.progressToken, sendNotification: extra.sendNotification, signal: extra.signal },
      }
      try {
        return await def.run(args as never, ctx)
      } catch (err) {
        return toolError(err, toolLog)
      }
    })
  }
  return server
}
