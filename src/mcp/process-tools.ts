// The MCP tools for background processes, one entry each: start one (a server, a watcher, a long
// build), read its output since a cursor (waiting a little for more), stop it with a signal, list
// them. The output stays readable after the process ends, as over the HTTP API.
import { Type } from 'typebox'
import { ProcessId, Session, SignalName, StartProcessBody } from '../schemas.js'
import { closedWorld, json, text, tool } from './tool-def.js'

/** Text one read_process_output call returns at most; the cursor then points at what follows. */
const READ_MAX_CHARS = 64 * 1024
const ProcessArgs = { session_id: Session.properties.id, process_id: ProcessId }

const startProcess = tool({
  name: 'start_process',
  holder: true,
  title: 'Start a background process',
  description:
    "Start a program that keeps running in a session's sandbox beside your code (a web server, a watcher, a long build): `bash -c command`, " +
    'in /workspace unless cwd says otherwise. Returns at once with its process_id; read what it prints with read_process_output and stop it with stop_process. ' +
    'Code run with run_python or run_bash reaches its servers on 127.0.0.1 (there is no other network).',
  input: Type.Object(
    {
      session_id: Session.properties.id,
      command: StartProcessBody.properties.command,
      cwd: StartProcessBody.properties.cwd,
      env: StartProcessBody.properties.env,
    },
    { additionalProperties: false },
  ),
  annotations: { ...closedWorld, readOnlyHint: false, destructiveHint: false, idempotentHint: false },
  async run(args, ctx) {
    const p = await ctx.processes.start(ctx.tenant, args.session_id, { command: args.command, cwd: args.cwd, env: args.env })
    ctx.log.info({ sessionId: args.session_id, processId: p.id }, 'mcp: process started')
    return text(`Process ${p.id} is running.\n${json(p)}`)
  },
})

const readProcessOutput = tool({
  name: 'read_process_output',
  title: "Read a background process's output",
  description:
    'What a background process printed (stdout and stderr, in order) after `cursor` (omit it for everything from the start), waiting up to wait_s ' +
    'seconds for more when there is nothing new yet. The last line says whether it is still running or its exit code, and the cursor to pass next time.',
  input: Type.Object(
    {
      ...ProcessArgs,
      cursor: Type.Optional(Type.String({ maxLength: 64, description: 'The cursor a previous call returned' })),
      wait_s: Type.Optional(Type.Number({ minimum: 0, maximum: 30, default: 2, description: 'How long to wait for output when none is new' })),
    },
    { additionalProperties: false },
  ),
  annotations: { ...closedWorld, readOnlyHint: true },
  async run(args, ctx) {
    const sid = args.session_id
    const pid = args.process_id
    await ctx.processes.record(ctx.tenant, sid, pid)
    let out = ''
    let cursor = args.cursor ?? ''
    /** Its exit code once its `exit` event was read (null: it ended with its sandbox); undefined while it runs. */
    let exitCode: number | null | undefined
    const ac = new AbortController()
    const stop = () => ac.abort()
    ctx.call.signal.addEventListener('abort', stop)
    const waited = setTimeout(stop, (args.wait_s ?? 2) * 1000)
    try {
      await ctx.processes.follow(
        sid,
        pid,
        cursor,
        (e) => {
          if (out.length >= READ_MAX_CHARS) return ac.abort()
          cursor = e.id
          if (e.type === 'stdout' || e.type === 'stderr') out += typeof e.text === 'string' ? e.text : ''
          else if (e.type === 'limit') out += `[output limit reached (${String(e.what)}): the rest was dropped]\n`
          else if (e.type === 'exit') exitCode = typeof e.exit_code === 'number' ? e.exit_code : null
          // Something came: wait no longer than for what arrives with it.
          clearTimeout(waited)
          setTimeout(stop, 50).unref()
        },
        ac.signal,
      )
    } finally {
      clearTimeout(waited)
      ctx.call.signal.removeEventListener('abort', stop)
    }
    const state =
      exitCode !== undefined
        ? `[exited with code ${exitCode ?? 'none (it ended with its sandbox)'}]`
        : `[running${out.length >= READ_MAX_CHARS ? '; more output follows' : ''}]`
    return text(`${out || '(no new output)\n'}${out.endsWith('\n') || !out ? '' : '\n'}${state} cursor: ${cursor || '(start)'}`)
  },
})

const stopProcess = tool({
  name: 'stop_process',
  holder: true,
  title: 'Stop a background process',
  description:
    'Send a signal to a background process and everything it started (TERM by default; KILL cannot be caught). Its output stays readable with read_process_output.',
  input: Type.Object(
    { ...ProcessArgs, signal: Type.Optional({ ...SignalName, default: 'TERM', description: 'The signal (default TERM)' }) },
    { additionalProperties: false },
  ),
  annotations: { ...closedWorld, readOnlyHint: false, destructiveHint: true, idempotentHint: false },
  async run(args, ctx) {
    await ctx.processes.signal(ctx.tenant, args.session_id, args.process_id, args.signal ?? 'TERM')
    return text(`Sent ${args.signal ?? 'TERM'} to process ${args.process_id}.`)
  },
})

const listProcesses = tool({
  name: 'list_processes',
  title: 'List background processes',
  description: "A session's background processes: id, command, running or exited with its exit code.",
  input: Type.Object({ session_id: Session.properties.id }, { additionalProperties: false }),
  annotations: { ...closedWorld, readOnlyHint: true },
  async run(args, ctx) {
    const list = await ctx.processes.list(ctx.tenant, args.session_id)
    if (list.length === 0) return text('No processes. Start one with start_process.')
    return text(json(list.map(({ id, command, status, exit_code, started_at }) => ({ id, command, status, exit_code, started_at }))))
  },
})

export const PROCESS_TOOLS = [startProcess, readProcessOutput, stopProcess, listProcesses]
