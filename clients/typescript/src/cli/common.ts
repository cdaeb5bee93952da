// What every CLI command shares: its context (client, output), its contract (options, usage, run),
// and the exit codes (documented in the README and `replcast --help`).
import type { ParseArgsOptionsConfig } from 'node:util'
import type { ReplcastClient } from '../client.ts'
import type { DoneStatus } from '../events.ts'
import type { Io } from './output.ts'

export interface Context {
  client: ReplcastClient
  io: Io
  /** Where the user's code comes from when it is not an argument. */
  stdin: NodeJS.ReadStream
}

type Values = Record<string, string | boolean | Array<string | boolean> | undefined>

export interface Command {
  summary: string
  usage: string
  options: ParseArgsOptionsConfig
  run(ctx: Context, args: string[], values: Values): Promise<number>
}

export const EXIT = { ok: 0, error: 1, usage: 2, api: 3, timeout: 124, interrupted: 130, killed: 137 } as const

/** The process's exit code for an execution that ended with `status` (null: it never ended); a bash script's own when it ran to its end. */
export function exitCodeFor(status: DoneStatus | null, scriptExit?: number | null): number {
  if ((status === 'ok' || status === 'error') && typeof scriptExit === 'number') return scriptExit
  switch (status) {
    case 'ok':
      return EXIT.ok
    case 'timeout':
      return EXIT.timeout
    case 'interrupted':
      return EXIT.interrupted
    case 'killed':
    case 'oom':
      return EXIT.killed
    default:
      return EXIT.error
  }
}

/** A mistake in the command line: printed with the command's usage, exit code 2. */
export class UsageError extends Error {}

export async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = []
  for await (const chunk of stream) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk)
  return Buffer.concat(chunks).toString('utf8')
}

/** Calls `onFirst` on the first SIGINT (Ctrl+C) and `onSecond` on any later one, until the returned function is called. */
export function onInterrupt(onFirst: () => void, onSecond: () => void): () => void {
  let count = 0
  const handler = () => {
    count += 1
    if (count === 1) onFirst()
    else onSecond()
  }
  process.on('SIGINT', handler)
  return () => process.off('SIGINT', handler)
}
