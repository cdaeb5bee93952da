// The `replcast` CLI as a user runs it: a child process of plain Node (no tap loader) against a server.
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { API_KEY } from './app.js'

export const CLI_BIN = fileURLToPath(new URL('../../clients/typescript/bin/replcast.js', import.meta.url))

/** The environment the CLI runs in: `url` and the key, without tap's TypeScript loader. */
export function cliEnv(url: string, key = API_KEY): Record<string, string | undefined> {
  const env: Record<string, string | undefined> = { ...process.env, REPLCAST_URL: url, REPLCAST_API_KEY: key }
  delete env.NODE_OPTIONS
  return env
}

/** Runs the CLI to its end: exit code, stdout, stderr. */
export function runCli(url: string, args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  const child = spawn(process.execPath, [CLI_BIN, ...args], { env: cliEnv(url), stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  child.stdout.on('data', (b: Buffer) => (out += b.toString()))
  child.stderr.on('data', (b: Buffer) => (err += b.toString()))
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, out, err })))
}
