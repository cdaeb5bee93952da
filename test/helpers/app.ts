// Builds a real app (real Docker, real Redis) isolated per test file: its own Redis key
// prefix and Docker deployment label; teardown closes it and removes what it left.
import type { Test } from 'tap'
import { Redis } from 'ioredis'
import Docker from 'dockerode'
import { randomBytes } from 'node:crypto'
import { buildApp } from '../../src/app.js'
import { createLogger } from '../../src/http/logger.js'
import { loadConfig, type Config } from '../../src/config.js'
import { LABEL } from '../../src/sandbox/labels.js'

export const API_KEY = 'test-key-alpha-0001'
export const OTHER_KEY = 'test-key-beta-0002'

export interface Harness {
  url: string
  config: Config
  deployment: string
  prefix: string
  redis: Redis
  /** Stops the current app instance (sandboxes stay) and starts another one on the same port, prefix and instance id. */
  restart(): Promise<void>
  /** Closes the app without the teardown's clean-up (simulating a stopped instance). */
  stop(): Promise<void>
  start(): Promise<void>
}

export function testEnv(extra: Record<string, string> = {}): Record<string, string> {
  return {
    REPLCAST_API_KEYS: `alpha=${API_KEY},beta=${OTHER_KEY}`,
    REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    // No warm pool unless a test asks for one (test/pool.test.ts): other tests count their containers,
    // and four idle sandboxes per app would crowd a two-core machine.
    SANDBOX_POOL_SIZE: '0',
    // runc unless a test names runsc (the hostile suites, gVisor, hibernation, snapshots, fork): a runc
    // sandbox starts in a third of runsc's time, which keeps a two-core run within CI's time.
    SANDBOX_RUNTIME: 'runc',
    // A tag of one's own (SANDBOX_IMAGE=... bash sandbox-image/build.sh) tests a changed image beside the default one.
    ...(process.env.SANDBOX_IMAGE ? { SANDBOX_IMAGE: process.env.SANDBOX_IMAGE } : {}),
    ...extra,
  }
}

/**
 * `env` may name REPLCAST_KEY_PREFIX / REPLCAST_DEPLOYMENT to share them with another app (a second instance).
 * `opts.now`: the clock of time windows (LLM budgets), for tests that must not straddle a window's end.
 * `opts.logLines`: the app logs at level info into it.
 */
export async function startApp(t: Test, env: Record<string, string> = {}, opts: { now?: () => number; logLines?: string[] } = {}): Promise<Harness> {
  const tag = randomBytes(4).toString('hex')
  const prefix = env.REPLCAST_KEY_PREFIX ?? `replcast-test-${tag}:`
  const deployment = env.REPLCAST_DEPLOYMENT ?? `test-${tag}`
  const config = loadConfig(
    testEnv({ REPLCAST_INSTANCE_ID: `test-instance-${tag}`, PORT: '0', ...env, REPLCAST_KEY_PREFIX: prefix, REPLCAST_DEPLOYMENT: deployment }),
  )
  const redis = new Redis(config.REDIS_URL)
  let app: Awaited<ReturnType<typeof buildApp>> | null = null
  let port = 0
  const h: Harness = {
    url: '',
    config,
    deployment,
    prefix,
    redis,
    async start() {
      const lines = opts.logLines
      const logger = lines ? createLogger('info', { write: (line: string) => void lines.push(line) }) : createLogger(config.LOG_LEVEL)
      app = await buildApp({ config: { ...config, PORT: port }, logger, now: opts.now })
      await app.listen({ host: '127.0.0.1', port })
      const addr = app.server.address()
      port = typeof addr === 'object' && addr ? addr.port : port
      h.url = `http://127.0.0.1:${port}`
    },
    async stop() {
      await app?.close()
      app = null
    },
    async restart() {
      await h.stop()
      await h.start()
    },
  }
  await h.start()
  const owns = env.REPLCAST_KEY_PREFIX === undefined
  t.teardown(async () => {
    await h.stop()
    if (owns) {
      await removeDeployment(deployment)
      const keys = await redis.keys(`${prefix}*`)
      if (keys.length) await redis.del(...keys)
    }
    redis.disconnect()
  })
  return h
}

export async function removeDeployment(deployment: string): Promise<void> {
  const docker = new Docker()
  const list = await docker.listContainers({ all: true, filters: { label: [`${LABEL.deployment}=${deployment}`] } })
  await Promise.all(
    list.map((c) =>
      docker
        .getContainer(c.Id)
        .remove({ force: true })
        .catch(() => undefined),
    ),
  )
}

export async function containersOf(deployment: string): Promise<Docker.ContainerInfo[]> {
  return new Docker().listContainers({ all: true, filters: { label: [`${LABEL.deployment}=${deployment}`] } })
}
