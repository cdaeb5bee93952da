// Runs the real server (src/server.ts) as a child process, so a test can SIGKILL it.
import { spawn, type ChildProcess } from 'node:child_process'
import { createServer } from 'node:net'
import { fileURLToPath } from 'node:url'
import { waitFor } from './wait.js'

const SERVER = fileURLToPath(new URL('../../src/server.ts', import.meta.url))

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer()
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address()
      const port = typeof addr === 'object' && addr ? addr.port : 0
      s.close(() => resolve(port))
    })
    s.on('error', reject)
  })
}

export interface ServerProcess { url: string; child: ChildProcess; output: () => string }

/** Starts the server with `env` (on top of this process's) and waits until /healthz answers. */
export async function spawnServer(env: Record<string, string>): Promise<ServerProcess> {
  // The same TypeScript loader flags tap gave this process.
  const child = spawn(process.execPath, [...process.execArgv, SERVER], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  child.stdout!.on('data', (b) => { output += b })
  child.stderr!.on('data', (b) => { output += b })
  const url = `http://127.0.0.1:${env.PORT}`
  const up = await waitFor(async () => {
    if (child.exitCode !== null) return true
    try { return (await fetch(`${url}/healthz`)).ok } catch { return false }
  }, 30000, 50)
  if (!up || child.exitCode !== null) throw new Error(`server did not start: ${output.slice(-2000)}`)
  return { url, child, output: () => output }
}

export async function killHard(p: ServerProcess): Promise<void> {
  if (p.child.exitCode !== null) return
  const exited = new Promise((r) => p.child.once('exit', r))
  p.child.kill('SIGKILL')
  await exited
}
