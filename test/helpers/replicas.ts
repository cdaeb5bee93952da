// Several real server processes (src/server.ts) on one Redis key prefix and one Docker deployment
// label, as replicas behind a plain balancer: a test sends requests round-robin, SIGKILLs or
// SIGTERMs one. Teardown stops them all and removes every container and key they left.
import { randomBytes } from 'node:crypto'
import { Redis } from 'ioredis'
import type { Test } from 'tap'
import { removeDeployment, testEnv } from './app.js'
import { freePort, killHard, spawnServer, type ServerProcess } from './server-process.js'

export interface Replicas {
  prefix: string
  deployment: string
  redis: Redis
  servers: ServerProcess[]
  /** Instance ids, by index. */
  ids: string[]
  /** The next server's URL, round-robin (skipping the ones that were stopped). */
  next(): string
  /** The index of the server whose instance holds the session's lease (-1: none). */
  holderOf(sid: string): Promise<number>
  /** Sends `signal` and waits for the process to exit; it leaves the round-robin. */
  stop(i: number, signal: 'SIGKILL' | 'SIGTERM'): Promise<void>
  /** Starts a stopped server again with its settings (the same instance id and port); it rejoins the round-robin. */
  restart(i: number): Promise<void>
}

export async function startReplicas(t: Test, n: number, extra: Record<string, string> = {}): Promise<Replicas> {
  const tag = randomBytes(4).toString('hex')
  const prefix = `replcast-test-${tag}:`
  const deployment = `test-${tag}`
  const ids = Array.from({ length: n }, (_, i) => `replica${i}-${tag}`)
  const envs = await Promise.all(
    ids.map(async (id) =>
      testEnv({
        REPLCAST_KEY_PREFIX: prefix,
        REPLCAST_DEPLOYMENT: deployment,
        REPLCAST_INSTANCE_ID: id,
        PORT: String(await freePort()),
        LOG_LEVEL: 'warn',
        ...extra,
      }),
    ),
  )
  const redis = new Redis(envs[0]!.REDIS_URL!)
  const servers: ServerProcess[] = []
  const stopped = new Set<number>()
  t.teardown(async () => {
    await Promise.all(servers.map((s) => killHard(s)))
    await removeDeployment(deployment)
    const keys = await redis.keys(`${prefix}*`)
    if (keys.length) await redis.del(...keys)
    redis.disconnect()
  })
  for (const env of envs) servers.push(await spawnServer(env))
  let turn = 0
  return {
    prefix,
    deployment,
    redis,
    servers,
    ids,
    next() {
      for (;;) {
        const i = turn++ % n
        if (!stopped.has(i)) return servers[i]!.url
      }
    },
    async holderOf(sid) {
      return ids.indexOf((await redis.get(`${prefix}{${sid}}:lease`)) ?? '')
    },
    async stop(i, signal) {
      stopped.add(i)
      const s = servers[i]!
      if (s.child.exitCode !== null || s.child.signalCode !== null) return
      const exited = new Promise((r) => s.child.once('exit', r))
      s.child.kill(signal)
      await exited
    },
    async restart(i) {
      servers[i] = await spawnServer(envs[i]!)
      stopped.delete(i)
    },
  }
}
