// The MCP tools that put a session to sleep and wake it: an agent that waits on something slow keeps
// its session's state on disk instead of in memory, and finds it as it was when it comes back.
import { closedWorld, json, SessionIdArg, text, tool } from './tool-def.js'

const hibernateSession = tool({
  name: 'hibernate_session',
  holder: true,
  title: 'Hibernate a session',
  description:
    'Put a session to sleep: its state (variables, imported modules, files in /workspace, cwd, environment) is saved to disk and its sandbox removed, so it holds no memory. ' +
    'The next run_python, run_bash, file or process call on it wakes it with everything as it was (or call wake_session first). ' +
    'Only runsc sessions can hibernate (runc ones answer not_supported); a session running code answers session_busy.',
  input: SessionIdArg,
  annotations: { ...closedWorld, readOnlyHint: false, destructiveHint: false, idempotentHint: true },
  async run(args, ctx) {
    const session = await ctx.sessions.hibernate(ctx.tenant, args.session_id)
    ctx.log.info({ sessionId: session.id }, 'mcp: session hibernated')
    return text(`Session ${session.id} is hibernated.\n${json(session)}`)
  },
})

const wakeSession = tool({
  name: 'wake_session',
  holder: true,
  title: 'Wake a hibernated session',
  description:
    'Wake a hibernated session now, with its state as it was, so the next call does not wait for it. Any use wakes it too; a session already awake is left as it is.',
  input: SessionIdArg,
  annotations: { ...closedWorld, readOnlyHint: false, destructiveHint: false, idempotentHint: true },
  async run(args, ctx) {
    const session = await ctx.sessions.wake(ctx.tenant, args.session_id)
    ctx.log.info({ sessionId: session.id }, 'mcp: session woken')
    return text(`Session ${session.id} is ${session.status}.\n${json(session)}`)
  },
})

export const HIBERNATION_TOOLS = [hibernateSession, wakeSession]
