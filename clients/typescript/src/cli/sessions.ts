// `replcast sessions ls` and `replcast sessions rm ID...`.
import { EXIT, UsageError, type Command } from './common.ts'

export const sessionsCommand: Command = {
  summary: 'list (ls) or delete (rm ID...) sessions',
  usage: `replcast sessions ls [--json]
replcast sessions rm ID...`,
  options: { json: { type: 'boolean' } },
  async run({ client, io }, args, values) {
    const [sub, ...ids] = args
    if (sub === 'ls' || sub === 'list') {
      const all = []
      for await (const s of client.allSessions()) all.push(s)
      if (values.json) {
        io.out.write(`${JSON.stringify(all, null, 2)}\n`)
        return EXIT.ok
      }
      const rows = [
        ['ID', 'STATUS', 'RUNTIME', 'EXECUTIONS', 'EXPIRES'],
        ...all.map((s) => [s.id, s.status, s.runtime, String(s.execution_count), s.expires_at]),
      ]
      const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)))
      for (const r of rows)
        io.out.write(
          `${r
            .map((c, i) => c.padEnd(widths[i]!))
            .join('  ')
            .trimEnd()}\n`,
        )
      return EXIT.ok
    }
    if (sub === 'rm' || sub === 'delete') {
      if (!ids.length) throw new UsageError('name the sessions to delete')
      let code: number = EXIT.ok
      for (const id of ids) {
        try {
          await client.deleteSession(id)
          io.out.write(`deleted ${id}\n`)
        } catch (err) {
          io.err.write(`replcast: ${id}: ${(err as Error).message}\n`)
          code = EXIT.api
        }
      }
      return code
    }
    throw new UsageError(sub ? `unknown subcommand: sessions ${sub}` : 'sessions needs a subcommand: ls or rm')
  },
}
