// The MCP tools, one entry each: name, description, input (TypeBox, built from the API's own schemas
// in schemas.ts) and what it does through the sessions layer. Adding a tool is adding one entry.
import type { CallToolResult, ToolAnnotations } from '@modelcontextprotocol/sdk/types.js'
import type { Logger } from 'pino'
import { Type, type Static, type TObject } from 'typebox'
import { AppError } from '../errors.js'
import { CreateSessionBody, ExecuteBody, Runtime, Session } from '../schemas.js'
import type { Executions, SessionService } from '../sessions/index.js'
import { RunOutput, type CallChannel } from './run-output.js'

interface ToolContext {
  tenant: string
  sessions: SessionService
  executions: Executions
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
  run(args: Static<I>, ctx: ToolContext): Promise<CallToolResult>
}

/** Keeps each entry's argument type checked against its own input schema. */
const tool = <I extends TObject>(def: ToolDef<I>): ToolDef => def

const text = (s: string): CallToolResult => ({ content: [{ type: 'text', text: s }] })
const json = (v: unknown): string => JSON.stringify(v, null, 2)

const SessionIdArg = Type.Object({ session_id: Session.properties.id }, { additionalProperties: false })
// Every tool runs code or changes sessions in a sandbox with no network: none reaches the outside world.
const closedWorld = { openWorldHint: false }

const createSession = tool({
  name: 'create_session',
  title: 'Create a Python session',
  description:
    'Start a new sandboxed Python session (a fresh REPL in its own locked-down container with no network access). ' +
    'Returns the session, whose id you pass to run_python. Sessions are removed after idle_timeout_s without use; delete them with delete_session when done.',
  input: Type.Object(
    { idle_timeout_s: CreateSessionBody.properties.idle_timeout_s, runtime: Type.Optional(Runtime), limits: CreateSessionBody.properties.limits },
    { additionalProperties: false },
  ),
  annotations: { ...closedWorld, readOnlyHint: false, destructiveHint: false, idempotentHint: false },
  async run(args, ctx) {
    const session = await ctx.sessions.create(ctx.tenant, args)
    ctx.log.info({ sessionId: session.id }, 'mcp: session created')
    return text(`Session ${session.id} is ready.\n${json(session)}`)
  },
})

const runPython = tool({
  name: 'run_python',
  title: 'Run Python',
  description:
    "Run Python code in a session's persistent REPL, like a notebook cell: variables, imports and files in /workspace are kept between calls. " +
    'Returns what the code printed (stdout and stderr, in order), the value of the last expression, matplotlib figures and displayed images as images, ' +
    'and the traceback when it raises (then the result is marked as an error). Output is also sent as progress or log notifications while the code runs. ' +
    'numpy, pandas and matplotlib are installed; there is no network.',
  input: Type.Object(
    { session_id: Session.properties.id, code: ExecuteBody.properties.code, timeout_s: ExecuteBody.properties.timeout_s },
    { additionalProperties: false },
  ),
  annotations: { ...closedWorld, readOnlyHint: false, destructiveHint: false, idempotentHint: false },
  async run(args, ctx) {
    const { session_id: sid } = args
    const eid = await ctx.executions.submit(ctx.tenant, sid, args.code, args.timeout_s)
    const output = new RunOutput(ctx.call)
    const ended = await ctx.executions.follow(sid, eid, '', (e) => output.add(e), ctx.call.signal)
    if (!ended && ctx.call.signal.aborted) {
      // The caller cancelled or left: nobody will read the result, so the code should not keep the session busy.
      await ctx.executions.interrupt(ctx.tenant, sid).catch(() => undefined)
      ctx.log.info({ sessionId: sid, executionId: eid }, 'mcp: call cancelled, execution interrupted')
    }
    return output.result(eid)
  },
})

const interrupt = tool({
  name: 'interrupt',
  title: 'Interrupt running code',
  description:
    'Interrupt the code running in a session (a KeyboardInterrupt in Python; variables and files are kept). The run_python call running it returns with the traceback.',
  input: SessionIdArg,
  annotations: { ...closedWorld, readOnlyHint: false, destructiveHint: false, idempotentHint: true },
  async run(args, ctx) {
    await ctx.executions.interrupt(ctx.tenant, args.session_id)
    return text(`Interrupt sent to session ${args.session_id}.`)
  },
})

const listSessions = tool({
  name: 'list_sessions',
  title: 'List sessions',
  description: 'List your Python sessions (id, status, when each expires unless used, executions so far).',
  input: Type.Object({}, { additionalProperties: false }),
  annotations: { ...closedWorld, readOnlyHint: true },
  async run(_args, ctx) {
    const { sessions } = await ctx.sessions.list(ctx.tenant, 200)
    if (sessions.length === 0) return text('No sessions. Create one with create_session.')
    return text(json(sessions.map(({ id, status, expires_at, execution_count, runtime }) => ({ id, status, expires_at, execution_count, runtime }))))
  },
})

const deleteSession = tool({
  name: 'delete_session',
  title: 'Delete a session',
  description: 'Delete a session: its container, Python state and files are removed for good.',
  input: SessionIdArg,
  annotations: { ...closedWorld, readOnlyHint: false, destructiveHint: true, idempotentHint: true },
  async run(args, ctx) {
    await ctx.sessions.delete(ctx.tenant, args.session_id)
    return text(`Session ${args.session_id} deleted.`)
  },
})

export const TOOLS: readonly ToolDef[] = [createSession, runPython, interrupt, listSessions, deleteSession]

/** A tool's failure as a result the model can read and act on (not a protocol error): the stable code and what to do. */
export function toolError(err: unknown, log: Logger): CallToolResult {
  const appErr = err instanceof AppError ? err : new AppError('internal', undefined, { cause: err })
  if (appErr.status >= 500) log.error({ err }, 'mcp tool failed')
  const detail = appErr.code === 'internal' ? 'internal error' : appErr.message
  return { content: [{ type: 'text', text: `${appErr.code}: ${detail}` }], isError: true }
}
