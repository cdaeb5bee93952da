// What every MCP tool entry is made of (its definition, the context it runs in) and the small helpers
// the tool files share, kept apart so each file of tools (tools.ts, file-tools.ts) can import them.
import type { CallToolResult, ToolAnnotations } from '@modelcontextprotocol/sdk/types.js'
import type { Logger } from 'pino'
import { Type, type Static, type TObject } from 'typebox'
import { Session } from '../schemas.js'
import type { Executions, OneShots, Processes, SessionFiles, SessionService, Snapshots } from '../sessions/index.js'
import type { CallChannel } from './run-output.js'

export interface ToolContext {
  tenant: string
  sessions: SessionService
  executions: Executions
  files: SessionFiles
  oneShots: OneShots
  processes: Processes
  snapshots: Snapshots
  /** The client's Authorization header: what a fork's copies on other engines are woken with (their instances authenticate it). */
  authorization?: string
  log: Logger
  /** The call's way back to the client, and its abort signal (the client cancelled or went away). */
  call: CallChannel & { signal: AbortSignal }
}

export interface ToolDef<I extends TObject = TObject> {
  name: string
  title: string
  description: string
  input: I
  annotations: ToolAnnotations
  /** The call needs the sandbox of its `session_id`: POST /mcp passes it to the instance holding that session (http/mcp-routing.ts). */
  holder?: boolean
  run(args: Static<I>, ctx: ToolContext): Promise<CallToolResult>
}

/** Keeps each entry's argument type checked against its own input schema. */
export const tool = <I extends TObject>(def: ToolDef<I>): ToolDef => def

export const text = (s: string): CallToolResult => ({ content: [{ type: 'text', text: s }] })
export const json = (v: unknown): string => JSON.stringify(v, null, 2)

export const SessionIdArg = Type.Object({ session_id: Session.properties.id }, { additionalProperties: false })
// Every tool runs code or changes sessions in a sandbox with no network: none reaches the outside world.
export const closedWorld = { openWorldHint: false }
