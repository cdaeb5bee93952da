// `replcast snapshot SESSION | ls | rm ID... | restore ID` and `replcast fork SESSION [-n COUNT]`:
// copies of a session's state, kept on the server or started as new sessions.
import type { Snapshot } from '../client.ts'
import { EXIT, UsageError, type Command } from './common.ts'
import { table } from './output.ts'

const SUBCOMMANDS = new Set(['ls', 'list', 'rm', 'delete', 'restore'])

export const snapshotCommand: Command = {
  summary: "copy a session's state (ls, rm ID..., restore ID: a new session from one)",
  usage: `replcast snapshot SESSION [--name NAME] [--json]
replcast snapshot ls [--json]
replcast snapshot rm ID...
replcast snapshot restore ID [--json]

snapshot SESSION copies the session's state (variables, imports, workspace files, processes) and
prints the snapshot's id; the session runs on after a short pause (runsc sessions only).
restore ID starts a new session with that state and prints its id.`,
  options: { name: { type: 'string' }, json: { type: 'boolean' } },
  async run({ client, io }, args, values) {
    const [first, ...rest] = args
    if (!first) throw new UsageError('snapshot needs a SESSION, or ls, rm or restore')
    const json = (v: unknown) => io.out.write(`${JSON.stringify(v, null, 2)}\n`)
    if (!SUBCOMMANDS.has(first)) {
      if (rest.length) throw new UsageError('snapshot takes one SESSION')
      const snap = await client.snapshot(first, values.name === undefined ? {} : { name: values.name as string })
      if (values.json) json(snap)
      else io.out.write(`${snap.id}\n`)
      return EXIT.ok
    }
    if (first === 'ls' || first === 'list') {
      const all: Snapshot[] = []
      for await (const s of client.allSnapshots()) all.push(s)
      if (values.json) json(all)
      else io.out.write(table([['ID', 'SESSION', 'NAME', 'BYTES', 'CREATED'], ...all.map((s) => [s.id, s.session_id, s.name, String(s.bytes), s.created_at])]))
      return EXIT.ok
    }
    if (first === 'restore') {
      if (rest.length !== 1) throw new UsageError('snapshot restore takes one snapshot ID')
      const s = await client.createSession({ snapshot_id: rest[0]! })
      if (values.json) json(s)
      else io.out.write(`${s.id}\n`)
      return EXIT.ok
    }
    if (!rest.length) throw new UsageError('name the snapshots to delete')
    let code: number = EXIT.ok
    for (const id of rest) {
      try {
        await client.deleteSnapshot(id)
        io.out.write(`deleted ${id}\n`)
      } catch (err) {
        io.err.write(`replcast: ${id}: ${(err as Error).message}\n`)
        code = EXIT.api
      }
    }
    return code
  },
}

export const forkCommand: Command = {
  summary: 'copy a session into new sessions: replcast fork SESSION [-n COUNT]',
  usage: `replcast fork SESSION [-n COUNT] [--json]

Starts COUNT (1-16, default 1) new sessions, each with the session's state now, independent
afterwards, and prints their ids one a line. The session runs on after a short pause.`,
  options: { count: { type: 'string', short: 'n' }, json: { type: 'boolean' } },
  async run({ client, io }, args, values) {
    if (args.length !== 1) throw new UsageError('fork takes one SESSION')
    const count = values.count === undefined ? 1 : Number(values.count)
    if (!Number.isInteger(count) || count < 1 || count > 16) throw new UsageError('-n COUNT is a whole number from 1 to 16')
    const sessions = await client.fork(args[0]!, { count })
    if (values.json) io.out.write(`${JSON.stringify(sessions, null, 2)}\n`)
    else for (const s of sessions) io.out.write(`${s.id}\n`)
    return EXIT.ok
  },
}
