// Runs the real server (src/server.ts) as a child process, so a test can SIGKILL it.
import { spawn, type ChildProcess } from 'node:child_process'
import { createServer } from 'node:net'
import { fileURLToPath } from 'node:url'
import { randomBytes } from 'node:crypto'
import { Redis } from 'ioredis'
import type { Test } from 'tap'
import { removeDeployment, testEnv } from './app.js'
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

export interface ServerProcess {
  url: string
  child: ChildProcess
  output: () => string
}

/** Starts the server with `env` (on top of this process's) and waits until /healthz answers. */
export async function spawnServer(env: Record<string, string>): Promise<ServerProcess> {
  // The same TypeScript loader flags tap gave this process.
  const child = spawn(process.execPath, [...process.execArgv, SERVER], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  child.stdout.on('data', (b) => {
    output += b
  })
  child.stderr.on('data', (b) => {
    output += b
  })
  const url = `http://127.0.0.1:${env.PORT}`
  const up = await waitFor(
    async () => {
      if (child.exitCode !== null) return true
      try {
        return (await fetch(`${url}/healthz`)).ok
      } catch {
        return false
      }
    },
    // The TypeScript loader compiles the server at each start: on two loaded cores that takes a while.
    60000,
    50,
  )
  if (!up || child.exitCode !== null) throw new Error(`server did not start: ${output.slice(-2000)}`)
  return { url, child, output: () => output }
}

export async function killHard(p: ServerProcess): Promise<void> {
  if (p.child.exitCode !== null || p.child.signalCode !== null) return
  const exited = new Promise((r) => p.child.once('exit', r))
  p.child.kill('SIGKILL')
  await exited
}

/**
 * A server process with its own key prefix, deployment label and instance id; teardown kills it
 * and removes what it left. `restart()` SIGKILLs it and starts another with the same settings.
 */
export async function isolatedServer(t: Test, name: string, extra: Record<string, string> = {}) {
  const tag = randomBytes(4).toString('hex')
  const env = testEnv({
    REPLCAST_KEY_PREFIX: `replcast-test-${tag}:`,
    REPLCAST_DEPLOYMENT: `test-${tag}`,
    REPLCAST_INSTANCE_ID: `${name}-${tag}`,
    PORT: String(await freePort()),
    LOG_LEVEL: 'warn',
    ...extra,
  })
  const redis = new Redis(env.REDIS_URL!)
  const h = {
    env,
    server: await spawnServer(env),
    async respawn() {
      h.server = await spawnServer(env)
    },
  }
  t.teardown(async () => {
    await killHard(h.server)
    await removeDeployment(env.REPLCAST_DEPLOYMENT!)
    const keys = await redis.keys(`${env.REPLCAST_KEY_PREFIX}*`)
    if (keys.length) await redis.del(...keys)
    redis.disconnect()
  })
  return h
}
