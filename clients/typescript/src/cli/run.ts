// `replcast run`: runs code (Python, or bash with --bash) from a file, stdin or -c, as `python` takes
// it, in a session (a new one, deleted afterwards, unless --session names one; or with --once a one-shot
// sandbox the server removes), streams its output live and exits with its status.
import { readFile } from 'node:fs/promises'
import type { EventStream } from '../events.ts'
import { EXIT, exitCodeFor, onInterrupt, readAll, UsageError, type Command, type Context } from './common.ts'
import { EventPrinter, Progress } from './output.ts'

/** Prints the stream's events as they come; the exit code of how it ended (a bash script's own exit code). */
async function follow(stream: EventStream, printer: EventPrinter): Promise<number> {
  let scriptExit: number | null | undefined
  for await (const e of stream) {
    printer.print(e)
    if (e.type === 'done') scriptExit = e.exit_code
  }
  return exitCodeFor(stream.status, scriptExit)
}

/** --once: POST /v1/execute. There is no session to interrupt: Ctrl+C stops following at once. */
async function runOnce(
  ctx: Context,
  code: string,
  opts: { timeout_s?: number; language?: 'bash' },
  printer: EventPrinter,
  progress: Progress,
): Promise<number> {
  const ac = new AbortController()
  const stopListening = onInterrupt(
    () => ac.abort(),
    () => ac.abort(),
  )
  try {
    progress.start('running')
    return await follow(await ctx.client.streamOnce(code, { ...opts, signal: ac.signal }), printer)
  } catch (err) {
    if (!ac.signal.aborted) throw err
    printer.note('left; the one-shot runs on in its sandbox until it ends or times out, then the sandbox is removed')
    return EXIT.interrupted
  } finally {
    stopListening()
    progress.stop()
  }
}

/**
 * The code, the way `python` takes it: `-c CODE`; a FILE; `-` for stdin; nothing, with stdin not a
 * terminal, for stdin too. Arguments after the code or file are not passed on (there is no argv to
 * give them): they are a usage mistake.
 */
async function codeFrom(ctx: Context, args: string[], inline: string | undefined, language: string): Promise<string> {
  if (inline !== undefined) {
    if (args.length) throw new UsageError(`-c takes the whole code as one argument; unexpected: ${args.join(' ')}`)
    return inline
  }
  if (args.length > 1) throw new UsageError(`one FILE at a time (arguments for the code are not supported): ${args.slice(1).join(' ')}`)
  const [file] = args
  if (file === '-' || (file === undefined && !ctx.stdin.isTTY)) return readAll(ctx.stdin)
  if (file === undefined) throw new UsageError(`no code: give a FILE, -c CODE, or ${language} on stdin (for an interactive console: replcast repl)`)
  try {
    return await readFile(file, 'utf8')
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    const hint = code === 'ENOENT' ? ` (to run code given as an argument, use -c: replcast run -c ${JSON.stringify(file)})` : ''
    throw new UsageError(`cannot read ${file}: ${code ?? (err as Error).message}${hint}`)
  }
}

export const runCommand: Command = {
  summary: 'run a FILE, stdin or -c CODE and stream its output; the exit code is the status',
  usage: `replcast run [FILE | - | -c CODE] [--bash] [--session ID | --keep | --once] [--timeout SECONDS]

  FILE            run the code in FILE (Python, or bash with --bash)
  -               read the code from stdin; so does giving nothing when stdin is not a terminal
  -c, --code CODE run CODE, given as one argument
  --bash          run it as a bash script (in /workspace); the exit code is the script's own
  -s, --session   run in this session (kept); otherwise a new session is made and deleted after
  --keep          keep the new session and print its id
  --once          no session: one request (POST /v1/execute) runs it in a fresh sandbox that the
                  server removes afterwards, even if this command is killed
  -t, --timeout   wall-clock limit in seconds

Examples: replcast run job.py · replcast run -c 'print(6 * 7)' · echo 'ls -l' | replcast run --bash

Ctrl+C interrupts the code (its state is kept); a second Ctrl+C leaves at once.
With --once, Ctrl+C leaves at once: the code runs on until it ends or times out.
Exit codes: 0 ok, 1 error, 124 timeout, 130 interrupted, 137 killed or out of memory;
with --bash, the script's exit code.`,
  options: {
    code: { type: 'string', short: 'c' },
    bash: { type: 'boolean' },
    session: { type: 'string', short: 's' },
    timeout: { type: 'string', short: 't' },
    keep: { type: 'boolean' },
    once: { type: 'boolean' },
  },
  async run(ctx, args, values) {
    const code = await codeFrom(ctx, args, values.code as string | undefined, values.bash ? 'a bash script' : 'Python')
    const timeout = values.timeout === undefined ? undefined : Number(values.timeout)
    if (timeout !== undefined && !(timeout > 0)) throw new UsageError('--timeout takes a number of seconds above 0')
    if (values.once && (values.session !== undefined || values.keep)) throw new UsageError('--once runs in a sandbox of its own: not with --session or --keep')
    const language = values.bash ? 'bash' : undefined
    const { client, io } = ctx
    const progress = new Progress(io)
    const printer = new EventPrinter(io, progress)
    if (values.once) return runOnce(ctx, code, { timeout_s: timeout, language }, printer, progress)
    const ac = new AbortController()
    let sid = values.session as string | undefined
    const created = !sid
    const stopListening = onInterrupt(
      () => {
        if (!sid) return ac.abort()
        printer.note('interrupting… (Ctrl+C again to leave at once)')
        client.interrupt(sid).catch(() => ac.abort())
      },
      () => ac.abort(),
    )
    try {
      if (!sid) {
        progress.start('starting a session')
        sid = (await client.createSession()).id
      }
      if (ac.signal.aborted) return EXIT.interrupted
      progress.start('running')
      return await follow(await client.stream(sid, code, { timeout_s: timeout, language, signal: ac.signal }), printer)
    } catch (err) {
      if (ac.signal.aborted) return EXIT.interrupted
      throw err
    } finally {
      stopListening()
      progress.stop()
      if (created && sid && !values.keep) await client.deleteSession(sid).catch(() => undefined)
      else if (created && sid) printer.note(`session kept: ${sid}`)
    }
  },
}
