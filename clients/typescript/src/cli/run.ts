// `replcast run`: runs code from an argument, a file or stdin in a session (a new one, deleted
// afterwards, unless --session names one), streams its output live and exits with its status.
import { readFile } from 'node:fs/promises'
import { EXIT, exitCodeFor, onInterrupt, readAll, UsageError, type Command, type Context } from './common.ts'
import { EventPrinter, Progress } from './output.ts'

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
  usage: `replcast run [CODE] [--file FILE|-] [--session ID] [--timeout SECONDS] [--keep]

  CODE            Python code (else --file, else stdin when it is not a terminal)
  -f, --file      read the code from FILE ('-' for stdin)
  -s, --session   run in this session (kept); otherwise a new session is made and deleted after
  -t, --timeout   wall-clock limit in seconds
  --keep          keep the new session and print its id

Ctrl+C interrupts the code (its state is kept); a second Ctrl+C leaves at once.
Exit codes: 0 ok, 1 error, 124 timeout, 130 interrupted, 137 killed or out of memory.`,
  options: {
    file: { type: 'string', short: 'f' },
    session: { type: 'string', short: 's' },
    timeout: { type: 'string', short: 't' },
    keep: { type: 'boolean' },
  },
  async run(ctx, args, values) {
    const code = await codeFrom(ctx, args, values.file as string | undefined)
    const timeout = values.timeout === undefined ? undefined : Number(values.timeout)
    if (timeout !== undefined && !(timeout > 0)) throw new UsageError('--timeout takes a number of seconds above 0')
    const { client, io } = ctx
    const progress = new Progress(io)
    const printer = new EventPrinter(io, progress)
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
      const stream = await client.stream(sid, code, { timeout_s: timeout, signal: ac.signal })
      for await (const e of stream) printer.print(e)
      return exitCodeFor(stream.status)
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
