// A private Redis with Sentinel for tests that fail Redis over: a primary and a replica
// (redis-server with scripts/redis.conf, files in a temporary directory) and one redis-sentinel
// watching them, all on free ports; destroy() kills every process and removes the directory.
import { spawn, type ChildProcess } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Redis } from 'ioredis'
import { freePort } from './private-redis.js'
import { waitFor } from './wait.js'

const REDIS_CONF = fileURLToPath(new URL('../../scripts/redis.conf', import.meta.url))
export const MASTER_NAME = 'replcast-test'

export interface SentinelSetup {
  /** REDIS_SENTINELS for the app. */
  sentinels: string
  ports: { primary: number; replica: number; sentinel: number }
  /** The port of the server the sentinel calls the master now. */
  masterPort(): Promise<number>
  /** SIGKILL of the server on `port` (no chance to save or hand anything over). */
  crash(port: number): Promise<void>
  /** A short-lived connection straight to the server on `port` (the caller disconnects it). */
  direct(port: number): Redis
  destroy(): Promise<void>
}

function quiet(port: number): Redis {
  const r = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
  r.on('error', () => undefined)
  return r
}

async function ask<T>(port: number, fn: (r: Redis) => Promise<T>): Promise<T | null> {
  const r = quiet(port)
  try {
    await r.connect()
    return await fn(r)
  } catch {
    return null
  } finally {
    r.disconnect()
  }
}

export async function startSentinelSetup(): Promise<SentinelSetup> {
  const dir = mkdtempSync(join(tmpdir(), 'replcast-sentinel-'))
  const ports = { primary: await freePort(), replica: await freePort(), sentinel: await freePort() }
  const procs = new Map<number, ChildProcess>()
  const run = (port: number, cmd: string, args: string[]) => {
    // setpriv --pdeathsig: the kernel kills the server if this test process dies before its teardown.
    const p = spawn('setpriv', ['--pdeathsig', 'KILL', cmd, ...args], { stdio: 'ignore' })
    procs.set(port, p)
    return p
  }
  const server = (port: number, extra: string[]) => {
    const d = join(dir, String(port))
    mkdirSync(d)
    // A copy each: the sentinel has every server rewrite its configuration file (CONFIG REWRITE) when it reconfigures them.
    const conf = join(d, 'redis.conf')
    copyFileSync(REDIS_CONF, conf)
    run(port, 'redis-server', [conf, '--port', String(port), '--bind', '127.0.0.1', '--dir', d, ...extra])
  }
  const setup: SentinelSetup = {
    sentinels: `127.0.0.1:${ports.sentinel}`,
    ports,
    async masterPort() {
      const addr = await ask(ports.sentinel, (r) => r.call('SENTINEL', 'get-master-addr-by-name', MASTER_NAME) as Promise<[string, string] | null>)
      return Number(addr?.[1] ?? 0)
    },
    async crash(port) {
      const p = procs.get(port)
      if (!p || p.exitCode !== null || p.signalCode !== null) return
      const exited = new Promise((r) => p.once('exit', r))
      p.kill('SIGKILL')
      await exited
    },
    direct: (port) => new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: 1 }),
    async destroy() {
      await Promise.all([...procs.keys()].map((port) => setup.crash(port)))
      rmSync(dir, { recursive: true, force: true })
    },
  }
  try {
    server(ports.primary, [])
    server(ports.replica, ['--replicaof', '127.0.0.1', String(ports.primary)])
    const synced = await waitFor(async () => ((await ask(ports.replica, (r) => r.info('replication'))) ?? '').includes('master_link_status:up'), 15000, 50)
    if (!synced) throw new Error('the replica did not sync with the primary')
    // The sentinel rewrites its configuration file: it gets one of its own.
    const conf = join(dir, 'sentinel.conf')
    writeFileSync(
      conf,
      [
        `port ${ports.sentinel}`,
        'bind 127.0.0.1',
        `dir ${dir}`,
        `sentinel monitor ${MASTER_NAME} 127.0.0.1 ${ports.primary} 1`,
        `sentinel down-after-milliseconds ${MASTER_NAME} 1000`,
        `sentinel failover-timeout ${MASTER_NAME} 10000`,
        '',
      ].join('\n'),
    )
    run(ports.sentinel, 'redis-sentinel', [conf])
    const watching = await waitFor(
      async () => ((await ask(ports.sentinel, (r) => r.call('SENTINEL', 'replicas', MASTER_NAME) as Promise<unknown[]>)) ?? []).length === 1,
      20000,
      100,
    )
    if (!watching) throw new Error('the sentinel did not find the replica')
  } catch (err) {
    await setup.destroy()
    throw err
  }
  return setup
}
