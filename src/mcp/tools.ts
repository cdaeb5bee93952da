// The MCP tools, one entry each: name, description, input (TypeBox, built from the API's own schemas
// in schemas.ts) and what it does through the sessions layer. Adding a tool is adding one entry;
// the file tools live in file-tools.ts, the background process tools in process-tools.ts.
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import type { Logger } from 'pino'
import { Type } from 'typebox'
import { AppError } from '../errors.js'
import { CreateSessionBody, ExecuteBody, IdleAction, OneShotBody, Runtime, Session } from '../schemas.js'
import { FILE_TOOLS, FileContentArgs, decodeContent } from './file-tools.js'
import { HIBERNATION_TOOLS } from './hibernation-tools.js'
import { SNAPSHOT_TOOLS } from './snapshot-tools.js'
import { PROCESS_TOOLS } from './process-tools.js'
import { RunOutput } from './run-output.js'
import { closedWorld, json, SessionIdArg, text, tool, type ToolContext, type ToolDef } from './tool-def.js'

export type { ToolDef } from './tool-def.js'

/** Follows an execution to its end into a tool result; a caller who cancels or leaves interrupts it (nobody will read the result). */
async function followRun(ctx: ToolContext, sid: string, eid: string): Promise<CallToolResult> {
  const output = new RunOutput(ctx.call)
  const ended = await ctx.executions.follow(sid, eid, '', (e) => output.add(e), ctx.call.signal)
  if (!ended && ctx.call.signal.aborted) {
    await ctx.executions.interrupt(ctx.tenant, sid).catch(() => undefined)
    ctx.log.info({ sessionId: sid, executionId: eid }, 'mcp: call cancelled, execution interrupted')
  }
  return output.result(eid)
}

const createSession = tool({
  name: 'create_session',
  title: 'Create a Python session',
  description:
    'Start a new sandboxed Python session (a fresh REPL in its own locked-down container with no network access). ' +
    'Returns the session, whose id you pass to run_python. Sessions are removed after idle_timeout_s without use (with idle_action "hibernate", a runsc session is hibernated instead: its state kept on disk for hibernated_ttl_s); delete them with delete_session when done. ' +
    "With snapshot_id, the new session starts with that snapshot's state (snapshot_session takes one).",
  input: Type.Object(
    {
      idle_timeout_s: CreateSessionBody.properties.idle_timeout_s,
      idle_action: Type.Optional(IdleAction),
      hibernated_ttl_s: CreateSessionBody.properties.hibernated_ttl_s,
      snapshot_id: CreateSessionBody.properties.snapshot_id,
      runtime: Type.Optional(Runtime),
      limits: CreateSessionBody.properties.limits,
    },
    { additionalProperties: false },
  ),
  annotations: { ...closedWorld, readOnlyHint: false, destructiveHint: false, idempotentHint: false },
  async run(args, ctx) {
    const session = args.snapshot_id ? await ctx.snapshots.createSession(ctx.tenant, args) : await ctx.sessions.create(ctx.tenant, args)
    ctx.log.info({ sessionId: session.id }, 'mcp: session created')
    return text(`Session ${session.id} is ready.\n${json(session)}`)
  },
})

const runPython = tool({
  name: 'run_python',
  holder: true,
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
    const eid = await ctx.executions.submit(ctx.tenant, args.session_id, { code: args.code, timeoutS: args.timeout_s })
    return followRun(ctx, args.session_id, eid)
  },
})

const runBash = tool({
  name: 'run_bash',
  holder: true,
  title: 'Run a bash script',
  description:
    "Run a bash script in a session's sandbox, as a child process with /workspace as its working directory (the same files run_python sees; " +
    "the Python variables are not touched). Returns what it printed (stdout and stderr, in order) and its exit code as the last line, '[exit code N]'; " +
    'a nonzero exit code marks the result as an error. Output is also sent as notifications while it runs. There is no network.',
  input: Type.Object(
    {
      session_id: Session.properties.id,
      code: { ...ExecuteBody.properties.code, description: 'The bash script' },
      timeout_s: ExecuteBody.properties.timeout_s,
    },
    { additionalProperties: false },
  ),
  annotations: { ...closedWorld, readOnlyHint: false, destructiveHint: false, idempotentHint: false },
  async run(args, ctx) {
    const eid = await ctx.executions.submit(ctx.tenant, args.session_id, { code: args.code, timeoutS: args.timeout_s, language: 'bash' })
    return followRun(ctx, args.session_id, eid)
  },
})

const execute = tool({
  name: 'execute',
  title: 'Run code once in a fresh sandbox',
  description:
    'Run Python (or a bash script) once in a fresh sandbox that is destroyed afterwards: no session to create or delete, and nothing persists ' +
    '(use create_session and run_python to keep state). Input files are written into /workspace first. Returns the output as run_python does ' +
    "(bash: with '[exit code N]'); failing code or a nonzero exit code marks the result as an error.",
  input: Type.Object(
    {
      code: OneShotBody.properties.code,
      language: OneShotBody.properties.language,
      template: OneShotBody.properties.template,
      files: Type.Optional(Type.Array(FileContentArgs, { maxItems: 1000, description: 'Files written into /workspace before the code runs' })),
      timeout_s: OneShotBody.properties.timeout_s,
    },
    { additionalProperties: false },
  ),
  annotations: { ...closedWorld, readOnlyHint: false, destructiveHint: false, idempotentHint: false },
  async run(args, ctx) {
    const files = (args.files ?? []).map((f) => ({ path: f.path, content_base64: decodeContent(f.content, f.encoding).toString('base64') }))
    const run = await ctx.oneShots.start(ctx.tenant, { code: args.code, language: args.language, template: args.template, timeout_s: args.timeout_s, files })
    try {
      return await followRun(ctx, run.sessionId, run.executionId)
    } finally {
      // The result is read: the sandbox goes once its execution has ended.
      run.release()
    }
  },
})

const interrupt = tool({
  name: 'interrupt',
  holder: true,
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
  holder: true,
  title: 'Delete a session',
  description: 'Delete a session: its container, Python state and files are removed for good.',
  input: SessionIdArg,
  annotations: { ...closedWorld, readOnlyHint: false, destructiveHint: true, idempotentHint: true },
  async run(args, ctx) {
    await ctx.sessions.delete(ctx.tenant, args.session_id)
    return text(`Session ${args.session_id} deleted.`)
  },
})

export const TOOLS: readonly ToolDef[] = [
  createSession,
  runPython,
  runBash,
  execute,
  interrupt,
  listSessions,
  deleteSession,
  ...FILE_TOOLS,
  ...PROCESS_TOOLS,
  ...HIBERNATION_TOOLS,
  ...SNAPSHOT_TOOLS,
]

/** A tool's failure as a result the model can read and act on (not a protocol error): the stable code and what to do. */
export function toolError(err: unknown, log: Logger): CallToolResult {
  const appErr = err instanceof AppError ? err : new AppError('internal', undefined, { cause: err })
  if (appErr.status >= 500) log.error({ err }, 'mcp tool failed')
  const detail = appErr.code === 'internal' ? 'internal error' : appErr.message
  return { content: [{ type: 'text', text: `${appErr.code}: ${detail}` }], isError: true }
}
