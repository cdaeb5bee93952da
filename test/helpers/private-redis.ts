// A private redis-server for tests that stop and restart Redis: a free port, append-only
// persistence in a temporary directory (so a restart keeps the data), never the shared one.
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { waitFor } from './wait.js'

export interface PrivateRedis {
  url: string
  port: number
  stop(): Promise<void>
  start(): Promise<void>
  destroy(): Promise<void>
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer()
    srv.once('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port
      srv.close(() => resolve(port))
    })
  })
}

export async function startPrivateRedis(): Promise<PrivateRedis> {
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'replcast-redis-'))
  let proc: ChildProcess | null = null
  const pinged = async () => {
    const r = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
    try {
      await r.connect()
      return (await r.ping()) === 'PONG'
    } catch {
      return false
    } finally {
      r.disconnect()
    }
  }
  const pr: PrivateRedis = {
    url: `redis://127.0.0.1:${port}`,
    port,
    async start() {
      proc = spawn(
        'redis-server',
        ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--appendonly', 'yes', '--appendfsync', 'always', '--save', ''],
        { stdio: 'ignore' },
      )
      if (!(await waitFor(pinged, 10000))) throw new Error('private redis-server did not start')
    },
    async stop() {
      const p = proc
      if (!p || p.exitCode !== null) return
      proc = null
      const exited = new Promise((r) => p.once('exit', r))
      p.kill('SIGTERM')
      await exited
    },
    async destroy() {
      await pr.stop()
      rmSync(dir, { recursive: true, force: true })
    },
  }
  await pr.start()
  return pr
}
