// `replcast shell SESSION`: an interactive bash in the session's sandbox, in this terminal. The local
// terminal is put in raw mode (every key goes to the remote shell, Ctrl+C and Ctrl+D included), the
// remote terminal follows this one's size (Node's 'resize' of stdout, on SIGWINCH), and the local
// terminal is restored however it ends. The exit code is the shell's.
import { EXIT, UsageError, type Command } from './common.ts'

export const shellCommand: Command = {
  summary: "an interactive bash in a session's sandbox, in this terminal",
  usage: `replcast shell SESSION

An interactive bash in the session's /workspace, beside its code: the same files and processes.
Every key goes to it, Ctrl+C and Ctrl+D included; leave with exit (or Ctrl+D at an empty prompt).
The remote terminal follows this terminal's size. Input that is not a terminal is sent as it is,
then Ctrl+D.
Exit codes: the shell's own; 3 when the connection drops or the session goes away (deleted, restarted).`,
  options: {},
  async run(ctx, args) {
    if (args.length !== 1) throw new UsageError('give one session id: replcast shell SESSION')
    const { client, io, stdin } = ctx
    const out = process.stdout
    const size = () => ({ cols: out.columns || 80, rows: out.rows || 24 })
    const pty = await client.pty(args[0]!, size())
    const raw = !!stdin.isTTY
    const onInput = (chunk: Buffer) => pty.write(chunk)
    const onEnd = () => pty.write('\x04')
    const onResize = () => {
      const { cols, rows } = size()
      pty.resize(cols, rows)
    }
    // Asked to stop (a signal, not a key: keys go to the shell): the terminal is closed, and with it the shell.
    const onSignal = () => pty.close()
    try {
      if (raw) stdin.setRawMode(true)
      pty.onData((bytes) => out.write(bytes))
      stdin.on('data', onInput)
      stdin.once('end', onEnd)
      stdin.resume()
      out.on('resize', onResize)
      process.on('SIGTERM', onSignal)
      process.on('SIGHUP', onSignal)
      const end = await pty.closed
      if (end.exitCode !== null) return end.exitCode
      io.err.write(`\r\nreplcast: the terminal closed: ${end.reason || `code ${end.code}`}\n`)
      return EXIT.api
    } finally {
      pty.close()
      out.off('resize', onResize)
      process.off('SIGTERM', onSignal)
      process.off('SIGHUP', onSignal)
      stdin.off('data', onInput)
      stdin.off('end', onEnd)
      if (raw) stdin.setRawMode(false)
      stdin.pause()
    }
  },
}
