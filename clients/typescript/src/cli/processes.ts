// Background processes from the terminal: `replcast start SESSION COMMAND`, `replcast ps [SESSION]`,
// `replcast logs [-f] [SESSION] PID` and `replcast kill [-s SIGNAL] [--rm] [SESSION] PID`. A process
// id names its process across the tenant's sessions, so SESSION may be left out (it is looked up).
import type { Process, ProcessSignal, ReplcastClient } from '../client.ts'
import { NotFoundError } from '../errors.ts'
import { EXIT, onInterrupt, UsageError, type Command } from './common.ts'
import { EventPrinter, Progress, table } from './output.ts'

/** Without -f, `logs` prints what the process has written and stops once nothing more came for this long. */
const LOGS_QUIET_MS = 300

/** The session and process an argument list names: `[SESSION] PID`. */
async function locate(client: ReplcastClient, args: string[]): Promise<{ sid: string; pid: string }> {
  if (args.length === 2) return { sid: args[0]!, pid: args[1]! }
  if (args.length !== 1) throw new UsageError('name the process: [SESSION] PID')
  const pid = args[0]!
  for await (const s of client.allSessions()) {
    try {
      await client.getProcess(s.id, pid)
      return { sid: s.id, pid }
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err
    }
  }
  throw new UsageError(`no process ${pid} in any of your sessions`)
}

export const startCommand: Command = {
  summary: 'start a background process: replcast start SESSION COMMAND',
  usage: `replcast start SESSION COMMAND [--cwd DIR]

Runs COMMAND (one argument, given to bash -c) in the session's sandbox, in the background,
and prints its process id (replcast logs -f PID follows its output).`,
  options: { cwd: { type: 'string' } },
  async run({ client, io }, args, values) {
    if (args.length !== 2) throw new UsageError('start takes a SESSION and a COMMAND (quote it: one argument)')
    const p = await client.startProcess(args[0]!, { command: args[1]!, ...(values.cwd ? { cwd: values.cwd as string } : {}) })
    io.out.write(`${p.id}\n`)
    return EXIT.ok
  },
}

export const psCommand: Command = {
  summary: "list background processes (a session's, or all of yours)",
  usage: 'replcast ps [SESSION] [--json]',
  options: { json: { type: 'boolean' } },
  async run({ client, io }, args, values) {
    if (args.length > 1) throw new UsageError('ps takes at most one SESSION')
    const sessions = args.length ? args : []
    if (!sessions.length) for await (const s of client.allSessions()) sessions.push(s.id)
    const all: Process[] = []
    for (const sid of sessions) all.push(...(await client.listProcesses(sid)))
    if (values.json) {
      io.out.write(`${JSON.stringify(all, null, 2)}\n`)
      return EXIT.ok
    }
    const state = (p: Process) => (p.status === 'running' ? 'running' : `exited (${p.exit_code ?? 'with its sandbox'})`)
    io.out.write(table([['ID', 'SESSION', 'STATUS', 'STARTED', 'COMMAND'], ...all.map((p) => [p.id, p.session_id, state(p), p.started_at, p.command])]))
    return EXIT.ok
  },
}

export const logsCommand: Command = {
  summary: "a background process's output (-f: follow it until it exits)",
  usage: `replcast logs [-f] [SESSION] PID

Prints the process's output so far (stdout to stdout, stderr to stderr). With -f, follows it
live and exits with the process's exit code when it exits; Ctrl+C stops following (the process
goes on).`,
  options: { follow: { type: 'boolean', short: 'f' } },
  async run({ client, io }, args, values) {
    const { sid, pid } = await locate(client, args)
    const ac = new AbortController()
    const stop = onInterrupt(
      () => ac.abort(),
      () => ac.abort(),
    )
    const printer = new EventPrinter(io, new Progress({ out: io.out, err: { write: () => true } }))
    let quiet: NodeJS.Timeout | null = null
    const idle = () => {
      if (values.follow) return
      if (quiet) clearTimeout(quiet)
      quiet = setTimeout(() => ac.abort(), LOGS_QUIET_MS)
    }
    try {
      idle()
      for await (const e of client.processOutput(sid, pid, { signal: ac.signal })) {
        // -f exits as the process did (137 when it ended with its sandbox).
        if (e.type === 'exit') return !values.follow ? EXIT.ok : typeof e.exit_code === 'number' ? e.exit_code : EXIT.killed
        printer.print(e)
        idle()
      }
      return EXIT.ok
    } catch (err) {
      if (ac.signal.aborted) return values.follow ? EXIT.interrupted : EXIT.ok
      throw err
    } finally {
      if (quiet) clearTimeout(quiet)
      stop()
    }
  },
}

export const killCommand: Command = {
  summary: 'signal a background process (TERM; -s SIGNAL), or --rm it (kill and forget)',
  usage: `replcast kill [-s SIGNAL] [--rm] [SESSION] PID

Sends SIGNAL (HUP, INT, QUIT, KILL, USR1, USR2, TERM, CONT, STOP, TSTP, WINCH, ALRM; default TERM)
to the process and everything it started. --rm kills it and forgets it (its output too).`,
  options: { signal: { type: 'string', short: 's' }, rm: { type: 'boolean' } },
  async run({ client, io }, args, values) {
    const { sid, pid } = await locate(client, args)
    if (values.rm) {
      await client.deleteProcess(sid, pid)
      io.out.write(`removed ${pid}\n`)
      return EXIT.ok
    }
    const signal = String(values.signal ?? 'TERM')
      .toUpperCase()
      .replace(/^SIG/, '') as ProcessSignal
    await client.signalProcess(sid, pid, signal)
    io.out.write(`sent ${signal} to ${pid}\n`)
    return EXIT.ok
  },
}
