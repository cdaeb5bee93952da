// `replcast repl`: an interactive console on one session. Lines are sent when they make a complete
// statement (input.ts); output streams as it comes; Ctrl+C interrupts running code (or drops the
// lines typed so far); Ctrl+D or exit() leaves, deleting the session unless it was given or --keep.
import { createInterface } from 'node:readline'
import type { ExecutionStream } from '../client.ts'
import { EXIT, type Command } from './common.ts'
import { InputBuffer } from './input.ts'
import { EventPrinter, Progress } from './output.ts'

export const replCommand: Command = {
  summary: 'an interactive Python console that keeps one session',
  usage: `replcast repl [--session ID] [--keep]

  -s, --session   use this session (kept); otherwise a new session is made and deleted on leaving
  --keep          keep the new session and print its id

Blocks (lines ending in ':') run after an empty line. Ctrl+C interrupts running code, Ctrl+D leaves.`,
  options: { session: { type: 'string', short: 's' }, keep: { type: 'boolean' } },
  async run(ctx, _args, values) {
    const { client, io, stdin } = ctx
    const interactive = !!stdin.isTTY
    const progress = new Progress(io)
    const printer = new EventPrinter(io, progress)
    let sid = values.session as string | undefined
    const created = !sid
    if (!sid) {
      progress.start('starting a session')
      sid = (await client.createSession()).id
      progress.stop()
    }
    const session = sid
    const rl = createInterface({ input: stdin, output: interactive ? process.stdout : undefined, terminal: interactive })
    const buffer = new InputBuffer()
    let current: ExecutionStream | null = null
    const prompt = () => {
      if (!interactive) return
      rl.setPrompt(buffer.pending ? '... ' : '>>> ')
      rl.prompt()
    }
    const interrupt = () => {
      if (current) {
        client.interrupt(session).catch((err: Error) => printer.note(`interrupt: ${err.message}`))
        return
      }
      buffer.flush()
      if (interactive) io.out.write('\nKeyboardInterrupt\n')
      prompt()
    }
    rl.on('SIGINT', interrupt) // Ctrl+C typed on a terminal (readline holds it in raw mode)
    process.on('SIGINT', interrupt) // a signal sent to the process
    const runOne = async (code: string) => {
      try {
        current = await client.stream(session, code)
        progress.start('running')
        for await (const e of current) printer.print(e)
      } catch (err) {
        printer.note(`replcast: ${(err as Error).message}`)
      } finally {
        current = null
        progress.stop()
      }
    }

    if (interactive) printer.note(`replcast ${session} · Python · Ctrl+C interrupts, Ctrl+D leaves`)
    prompt()
    try {
      for await (const line of rl) {
        if (!buffer.pending && /^\s*(exit|quit)(\(\))?\s*$/.test(line)) break
        for (const code of buffer.feed(line)) await runOne(code)
        prompt()
      }
      const rest = buffer.flush()
      if (rest) await runOne(rest)
    } finally {
      process.off('SIGINT', interrupt)
      rl.close()
      if (created && !values.keep) await client.deleteSession(session).catch(() => undefined)
      else if (created) printer.note(`session kept: ${session}`)
    }
    return EXIT.ok
  },
}
