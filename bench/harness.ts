// A real app for a benchmark (real Docker, real Redis) under its own key prefix and deployment
// label, and the clean-up of what it leaves behind.
import { randomBytes } from 'node:crypto'
import { pino } from 'pino'
import { buildApp } from '../src/app.js'
import { loadConfig, type Config } from '../src/config.js'
import { removeDeployment } from './cleanup.js'

export { removeDeployment }

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
    // runc, as bench/server.ts (its figures are runc's).
    SANDBOX_RUNTIME: 'runc',
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
