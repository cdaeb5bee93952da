// A private redis-server for tests that stop, crash and restart Redis: a free port, persistence as
// replcast runs it (scripts/redis.conf) in a temporary directory, never the shared one.
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Redis } from 'ioredis'
import { waitFor } from './wait.js'

export interface PrivateRedis {
  url: string
  port: number
  /** Where it keeps its files. */
  dir: string
  stop(): Promise<void>
  start(): Promise<void>
  /** SIGKILL: no chance to flush or save anything (what survives is what was already in its files). */
  crash(): Promise<void>
  destroy(): Promise<void>
}

/** The Redis options scripts/setup.sh and docker-compose.yml use. */
const REDIS_CONF = fileURLToPath(new URL('../../scripts/redis.conf', import.meta.url))

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer()
    srv.once('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port
      srv.close(() => resolve(port))
    })
  })
}

/** `persistent: false`: no append-only file (a Redis as older setup scripts started it). */
export async function startPrivateRedis(opts: { persistent?: boolean } = {}): Promise<PrivateRedis> {
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'replcast-redis-'))
  let proc: ChildProcess | null = null
  const pinged = async () => {
    const r = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
    r.on('error', () => undefined) // a refused connection while it starts: connect() says so
    try {
      await r.connect()
      return (await r.ping()) === 'PONG'
    } catch {
      return false
    } finally {
      r.disconnect()
    }
  }
  const end = async (signal: NodeJS.Signals) => {
    const p = proc
    if (!p || p.exitCode !== null || p.signalCode !== null) return
    proc = null
    const exited = new Promise((r) => p.once('exit', r))
    p.kill(signal)
    await exited
  }
  const pr: PrivateRedis = {
    url: `redis://127.0.0.1:${port}`,
    port,
    dir,
    async start() {
      const persistence = opts.persistent === false ? ['--appendonly', 'no'] : []
      proc = spawn('redis-server', [REDIS_CONF, '--port', String(port), '--bind', '127.0.0.1', '--dir', dir, ...persistence], { stdio: 'ignore' })
      if (!(await waitFor(pinged, 10000))) throw new Error('private redis-server did not start')
    },
    stop: () => end('SIGTERM'),
    crash: () => end('SIGKILL'),
    async destroy() {
      // SIGKILL: its files go anyway (and SIGTERM is refused while Redis writes its first append-only file).
      await pr.crash()
      rmSync(dir, { recursive: true, force: true })
    },
  }
  await pr.start()
  return pr
}

/**
 * The test's own connection to the Redis at `url`, able to pause its writes (CLIENT PAUSE ... WRITE:
 * reads, this connection's included, go on); Redis is unpaused at the test's end, whatever happens.
 */
export function writePauser(t: { teardown: (fn: () => Promise<void>) => void }, url: string) {
  const admin = new Redis(url)
  admin.on('error', () => undefined)
  let paused = false
  const pause = async (on: boolean) => {
    await admin.call('CLIENT', ...(on ? ['PAUSE', '120000', 'WRITE'] : ['UNPAUSE']))
    paused = on
  }
  t.teardown(async () => {
    if (paused) await pause(false)
    admin.disconnect()
  })
  return { admin, pause }
}
