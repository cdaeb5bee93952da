// A real app for a benchmark (real Docker, real Redis) under its own key prefix and deployment
// label, and the clean-up of what it leaves behind.
import Docker from 'dockerode'
import { randomBytes } from 'node:crypto'
import { Redis } from 'ioredis'
import { pino } from 'pino'
import { buildApp } from '../src/app.js'
import { loadConfig, type Config } from '../src/config.js'
import { LABEL } from '../src/sandbox/labels.js'

export interface BenchApp {
  base: string
  config: Config
  headers: Record<string, string>
  close(): Promise<void>
}

export async function startBenchApp(env: Record<string, string> = {}): Promise<BenchApp> {
  const tag = randomBytes(4).toString('hex')
  const key = `bench-key-${tag}`
  const config = loadConfig({
    ...process.env,
    REPLCAST_API_KEYS: `bench=${key}`,
    REPLCAST_KEY_PREFIX: `replcast-bench-${tag}:`,
    REPLCAST_DEPLOYMENT: `bench-${tag}`,
    REPLCAST_INSTANCE_ID: `bench-${tag}`,
    LOG_LEVEL: 'silent',
    TENANT_MAX_SESSIONS: '1000',
    TENANT_RATE_PER_MIN: '1000000',
    // Cold sandboxes unless a benchmark asks for the warm pool (bench/pool.ts), so figures stay comparable.
    SANDBOX_POOL_SIZE: '0',
    ...env,
  })
  const app = await buildApp({ config, logger: pino({ level: 'silent' }) })
  await app.listen({ host: '127.0.0.1', port: 0 })
  const addr = app.server.address()
  return {
    base: `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`,
    config,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    async close() {
      await app.close()
      await removeDeployment(config.REPLCAST_DEPLOYMENT, config.REPLCAST_KEY_PREFIX, config.REDIS_URL)
    },
  }
}

/** Removes a benchmark's containers (by deployment label) and its Redis keys (by prefix). */
export async function removeDeployment(deployment: string, keyPrefix: string, redisUrl: string): Promise<void> {
  const docker = new Docker()
  const left = await docker.listContainers({ all: true, filters: { label: [`${LABEL.deployment}=${deployment}`] } })
  await Promise.all(
    left.map((c) =>
      docker
        .getContainer(c.Id)
        .remove({ force: true })
        .catch(() => undefined),
    ),
  )
  const r = new Redis(redisUrl)
  const keys = await r.keys(`${keyPrefix}*`)
  if (keys.length) await r.del(...keys)
  r.disconnect()
}
