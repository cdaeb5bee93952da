// Renders openapi.yaml from the route schemas (no Redis or Docker is contacted).
// `node dist/openapi.js` prints it; the committed file is drift-tested.
import { Redis } from 'ioredis'
import { pino } from 'pino'
import { buildApp } from './app.js'
import { loadConfig } from './config.js'

export async function renderOpenApi(): Promise<string> {
  const config = loadConfig({ REPLCAST_API_KEYS: 'openapi=render-only-key', LOG_LEVEL: 'silent' })
  const redis = new Redis({ lazyConnect: true, enableOfflineQueue: false })
  const app = await buildApp({ config, redis, logger: pino({ level: 'silent' }), background: false })
  await app.ready()
  const yaml = app.swagger({ yaml: true })
  await app.close()
  redis.disconnect()
  return yaml
}

if (import.meta.url === `file://${process.argv[1]}`) {
  process.stdout.write(await renderOpenApi())
}
