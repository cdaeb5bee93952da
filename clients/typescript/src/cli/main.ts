#!/usr/bin/env node
// The replcast CLI: `replcast <command>`, one entry per command in COMMANDS. The server and key come
// from --url/--key or REPLCAST_URL/REPLCAST_API_KEY.
import { readFileSync } from 'node:fs'
import { parseArgs, type ParseArgsOptionsConfig } from 'node:util'
import { ReplcastClient } from '../client.ts'
import { ReplcastError } from '../errors.ts'
import { EXIT, UsageError, type Command, type Context } from './common.ts'
import { filesCommand } from './files.ts'
import { hibernateCommand, wakeCommand } from './hibernate.ts'
import { forkCommand, snapshotCommand } from './snapshots.ts'
import { replCommand } from './repl.ts'
import { runCommand } from './run.ts'
import { sessionsCommand } from './sessions.ts'
import { shellCommand } from './shell.ts'
import { killCommand, logsCommand, psCommand, startCommand } from './processes.ts'

const COMMANDS: Record<string, Command> = {
  run: runCommand,
  repl: replCommand,
  shell: shellCommand,
  files: filesCommand,
  sessions: sessionsCommand,
  start: startCommand,
  ps: psCommand,
  logs: logsCommand,
  kill: killCommand,
  hibernate: hibernateCommand,
  wake: wakeCommand,
  snapshot: snapshotCommand,
  fork: forkCommand,
}

const GLOBAL: ParseArgsOptionsConfig = {
  url: { type: 'string' },
  key: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean' },
}

const HELP = `replcast: run Python in replcast sandboxes from a terminal

Usage: replcast <command> [options]

Commands:
${Object.entries(COMMANDS)
  .map(([name, c]) => `  ${name.padEnd(10)}${c.summary}`)
  .join('\n')}

Options (any command):
  --url URL   the server (default: $REPLCAST_URL, else http://127.0.0.1:8080)
  --key KEY   an API key (default: $REPLCAST_API_KEY)
  -h, --help  help for a command: replcast run --help

Exit codes: 0 ok, 1 the code raised, 2 usage, 3 API or connection error, 124 timeout, 130 interrupted, 137 killed or out of memory;
run --bash exits with the script's exit code, shell with the shell's, logs -f with the process's.`

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
  return pkg.version
}

/** The command's name: the first argument that is not a global option or its value. */
function splitCommand(argv: string[]): { name: string | undefined; rest: string[] } {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!
    if (a === '--url' || a === '--key') i++
    else if (!a.startsWith('-')) return { name: a, rest: [...argv.slice(0, i), ...argv.slice(i + 1)] }
  }
  return { name: undefined, rest: argv }
}

async function main(
  argv: string[],
  ctxIo: Omit<Context, 'client'> = { io: { out: process.stdout, err: process.stderr }, stdin: process.stdin },
): Promise<number> {
  const { io } = ctxIo
  const { name, rest } = splitCommand(argv)
  const command = name ? COMMANDS[name] : undefined
  try {
    if (name && !command) throw new UsageError(`unknown command: ${name}`)
    const { values, positionals } = parseArgs({ args: rest, options: { ...GLOBAL, ...command?.options }, allowPositionals: true, strict: true })
    if (values.version) {
      io.out.write(`${version()}\n`)
      return EXIT.ok
    }
    if (!command || values.help) {
      io.out.write(`${command ? command.usage : HELP}\n`)
      return command || values.help ? EXIT.ok : EXIT.usage
    }
    const apiKey = (values.key as string | undefined) ?? process.env.REPLCAST_API_KEY
    if (!apiKey) throw new UsageError('no API key: pass --key or set REPLCAST_API_KEY')
    const client = new ReplcastClient({ url: values.url as string | undefined, apiKey })
    return await command.run({ ...ctxIo, client }, positionals, values)
  } catch (err) {
    if (err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      io.err.write(`replcast: ${(err as Error).message}\n${command ? `\n${command.usage}\n` : 'Run replcast --help for the commands.\n'}`)
      return EXIT.usage
    }
    if (err instanceof ReplcastError) {
      io.err.write(`replcast: ${err.message}\n`)
      return EXIT.api
    }
    throw err
  }
}

process.exitCode = await main(process.argv.slice(2))
