// Real server processes (src/server.ts) on one Redis key prefix and one Docker deployment label,
// started one by one, each with settings of its own (a Docker engine, a memory share...). Teardown
// kills them all and removes every container and key they left.
import { randomBytes } from 'node:crypto'
import { Redis } from 'ioredis'
import type { Test } from 'tap'
import { removeDeployment, testEnv } from './app.js'
import { freePort, killHard, spawnServer, type ServerProcess } from './server-process.js'

export interface ProcessDeployment {
  /** What makes this deployment's names unique: instance `name` is `name-tag`. */
  tag: string
  prefix: string
  deployment: string
  redis: Redis
  /** The servers started, by name (the latest process of each). */
  servers: Map<string, ServerProcess>
  /** Starts server `name`; started again, it keeps the settings and port it was first given. */
  start(name: string, settings?: Record<string, string>): Promise<ServerProcess>
  /** Redis's record of session `sid` (one field, or null). */
  sessionField(sid: string, field: string): Promise<string | null>
}

export function processDeployment(t: Test): ProcessDeployment {
  const tag = randomBytes(4).toString('hex')
  const prefix = `replcast-test-${tag}:`
  const deployment = `test-${tag}`
  const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379')
  const servers = new Map<string, ServerProcess>()
  const envs = new Map<string, Record<string, string>>()
  const spawned: ServerProcess[] = []
  t.teardown(async () => {
    await Promise.all(spawned.map((s) => killHard(s)))
    await removeDeployment(deployment)
    const keys = await redis.keys(`${prefix}*`)
    if (keys.length) await redis.del(...keys)
    redis.disconnect()
  })
  return {
    tag,
    prefix,
    deployment,
    redis,
    servers,
    async start(name, settings = {}) {
      const env =
        envs.get(name) ??
        testEnv({
          REPLCAST_KEY_PREFIX: prefix,
          REPLCAST_DEPLOYMENT: deployment,
          REPLCAST_INSTANCE_ID: `${name}-${tag}`,
          PORT: String(await freePort()),
          LOG_LEVEL: 'warn',
          ...settings,
        })
      envs.set(name, env)
      const s = await spawnServer(env)
      spawned.push(s)
      servers.set(name, s)
      return s
    },
    sessionField: (sid, field) => redis.hget(`${prefix}{${sid}}:session`, field),
  }
}
