// `replcast run`: runs code (Python, or bash with --bash) from an argument, a file or stdin in a
// session (a new one, deleted afterwards, unless --session names one; or with --once a one-shot
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

async function codeFrom(ctx: Context, args: string[], file: string | undefined): Promise<string> {
  if (file !== undefined && args.length) throw new UsageError('give the code as an argument or with --file, not both')
  if (file === '-' || (file === undefined && !args.length && !ctx.stdin.isTTY)) return readAll(ctx.stdin)
  if (file !== undefined) {
    try {
      return await readFile(file, 'utf8')
    } catch (err) {
      throw new UsageError(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`)
    }
  }
  if (!args.length) throw new UsageError('no code: pass it as an argument, with --file FILE, or on stdin')
  return args.join(' ')
}

export const runCommand: Command = {
  summary: 'run code and stream its output; the exit code is the execution status',
  usage: `replcast run [CODE] [--file FILE|-] [--bash] [--session ID | --keep | --once] [--timeout SECONDS]

  CODE            Python code (else --file, else stdin when it is not a terminal)
  -f, --file      read the code from FILE ('-' for stdin)
  --bash          run it as a bash script (in /workspace); the exit code is the script's own
  -s, --session   run in this session (kept); otherwise a new session is made and deleted after
  --keep          keep the new session and print its id
  --once          no session: one request (POST /v1/execute) runs it in a fresh sandbox that the
                  server removes afterwards, even if this command is killed
  -t, --timeout   wall-clock limit in seconds

Ctrl+C interrupts the code (its state is kept); a second Ctrl+C leaves at once.
With --once, Ctrl+C leaves at once: the code runs on until it ends or times out.
Exit codes: 0 ok, 1 error, 124 timeout, 130 interrupted, 137 killed or out of memory;
with --bash, the script's exit code.`,
  options: {
    file: { type: 'string', short: 'f' },
    bash: { type: 'boolean' },
    session: { type: 'string', short: 's' },
    timeout: { type: 'string', short: 't' },
    keep: { type: 'boolean' },
    once: { type: 'boolean' },
  },
  async run(ctx, args, values) {
    const code = await codeFrom(ctx, args, values.file as string | undefined)
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
