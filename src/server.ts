// Entry point: configuration from the environment, build the app, listen; on SIGTERM/SIGINT
// stop accepting, end open streams, close Redis. Sandboxes stay running for re-adoption.
import { loadConfig, ConfigError } from './config.js'
import { buildApp } from './app.js'

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
