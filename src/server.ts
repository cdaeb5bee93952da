// Entry point: configuration from the environment, build the app, listen; on SIGTERM/SIGINT
// stop accepting, end open streams, close Redis. Sandboxes stay running for re-adoption.
import { setFlagsFromString } from 'node:v8'
import { loadConfig, ConfigError } from './config.js'
import { buildApp } from './app.js'

// V8 lets the old generation grow up to 4× what survived its last full collection while the
// process is busy, and output streamed through the API is mostly short-lived garbage that a young
// collection already found alive once (it waits for Redis or a client): 50 MB of output grew the
// heap by 110 MB before a collection. 1.4× keeps that under 50 MB at the same speed (bench/bulk.ts).
// Read by V8 after every collection, so setting it here, at start, is in time.
setFlagsFromString('--heap-growing-percent=40')

async function main(): Promise<void> {
  let config
  try {
    config = loadConfig()
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`replcast: configuration error: ${err.message}`)
      process.exit(2)
    }
    throw err
  }
  const app = await buildApp({ config })
  let stopping = false
  const stop = async (signal: string) => {
    if (stopping) return
    stopping = true
    app.log.info({ signal }, 'shutting down')
    const force = setTimeout(() => process.exit(1), 10_000)
    force.unref()
    await app.close()
    process.exit(0)
  }
  // A bug in one session's background work must not take every other session down with it.
  process.on('unhandledRejection', (err) => app.log.error({ err }, 'unhandled rejection'))
  process.on('SIGTERM', () => void stop('SIGTERM'))
  process.on('SIGINT', () => void stop('SIGINT'))
  await app.listen({ host: config.HOST, port: config.PORT })
}

main().catch((err) => {
  console.error('replcast: failed to start:', err)
  process.exit(1)
})
