// Redis keeps what it is given: the Redis that `npm start` runs has an append-only file (set up by
// scripts/setup.sh from scripts/redis.conf, or switched on in one replcast started earlier without
// it), and after a SIGKILL of Redis and a restart from its files the API reconnects by itself and
// every session, container and variable is still there.
import t from 'tap'
import { execFile } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { Redis } from 'ioredis'
import { redisKeys } from '../src/store/keys.js'
import { API_KEY, OTHER_KEY, containersOf, startApp } from './helpers/app.js'
import { api, createSession, stdoutOf } from './helpers/client.js'
import { executeWithin } from './helpers/neighbour.js'
import { freePort, startPrivateRedis } from './helpers/private-redis.js'
import { waitFor } from './helpers/wait.js'

const SETUP = fileURLToPath(new URL('../scripts/setup.sh', import.meta.url))
const run = promisify(execFile)

/** Runs `scripts/setup.sh redis` against port `port` with its state folder in `state`. */
const setupRedis = (state: string, port: number) => run('bash', [SETUP, 'redis'], { env: { ...process.env, REPLCAST_STATE: state, REDIS_PORT: String(port) } })

async function persistence(port: number): Promise<{ appendonly: string; appendfsync: string; dir: string }> {
  const r = new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: 1 })
  try {
    const get = async (name: string) => (await r.config('GET', name))[1] ?? ''
    return { appendonly: await get('appendonly'), appendfsync: await get('appendfsync'), dir: await get('dir') }
  } finally {
    r.disconnect()
  }
}

t.test('scripts/setup.sh runs Redis with persistence under the state folder', async (t) => {
  const state = mkdtempSync(join(tmpdir(), 'replcast-state-'))
  const port = await freePort()
  t.teardown(async () => {
    // The redis-server the script started (daemonized): stopped through its port.
    const r = new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true })
    r.on('error', () => undefined)
    await r
      .connect()
      .then(() => r.shutdown('NOSAVE'))
      .catch(() => undefined)
    r.disconnect()
    rmSync(state, { recursive: true, force: true })
  })
  await setupRedis(state, port)
  t.same(
    await persistence(port),
    { appendonly: 'yes', appendfsync: 'everysec', dir: join(state, 'redis') },
    'append-only file, fsync every second, under the state folder',
  )
  t.ok(await waitFor(() => existsSync(join(state, 'redis', 'appendonlydir')), 30_000), 'its append-only files are there')
})

t.test('npm start reaches the Redis it runs through a unix socket that only its owner may open', async (t) => {
  const state = mkdtempSync(join(tmpdir(), 'replcast-state-'))
  const port = await freePort()
  const admin = new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true })
  admin.on('error', () => undefined)
  t.teardown(async () => {
    // The redis-server the script started (daemonized): stopped through its port, then its files removed.
    await admin.shutdown('NOSAVE').catch(() => undefined)
    admin.disconnect()
    rmSync(state, { recursive: true, force: true })
  })
  const { REDIS_URL: _set, ...env } = process.env
  // What scripts sourcing setup.sh (npm start, npm test, npm run bench) are left with.
  const { stdout } = await run('bash', ['-c', 'source "$0" redis >/dev/null && printf %s "$REDIS_URL"', SETUP], {
    env: { ...env, REPLCAST_STATE: state, REDIS_PORT: String(port) },
  })
  const sock = join(state, 'redis', 'redis.sock')
  t.equal(stdout, sock, 'REDIS_URL is the socket of the Redis it started')
  await admin.connect()
  const st = statSync(sock)
  t.ok(st.isSocket(), 'a unix socket')
  t.equal(st.mode & 0o777, 0o700, 'owner only')
  const h = await startApp(t, { REDIS_URL: sock })
  const sid = await createSession(h.url)
  t.equal(stdoutOf((await executeWithin(h.url, sid, 'print(6 * 7)', { key: API_KEY })).events), '42\n', 'the service runs code with its state in that Redis')
  const clients = String(await admin.client('LIST')).split('\n')
  t.ok(clients.filter((c) => c.includes(` addr=${sock}:`)).length >= 2, "the service's connections come through the socket")
  t.equal(await admin.exists(redisKeys(h.config.REPLCAST_KEY_PREFIX).session(sid)), 1, 'the same Redis as on its port')
})

t.test('a Redis replcast started earlier without persistence gets it switched on; another is left alone', async (t) => {
  const redis = await startPrivateRedis({ persistent: false })
  t.teardown(() => redis.destroy())
  t.equal((await persistence(redis.port)).appendonly, 'no', 'running without persistence')
  const elsewhere = mkdtempSync(join(tmpdir(), 'replcast-state-'))
  t.teardown(() => rmSync(elsewhere, { recursive: true, force: true }))
  await setupRedis(elsewhere, redis.port)
  t.equal((await persistence(redis.port)).appendonly, 'no', 'a Redis keeping its files outside the state folder is not ours: left as it is')
  // Earlier versions of setup.sh started Redis with its files right in the state folder.
  await setupRedis(redis.dir, redis.port)
  const p = await persistence(redis.port)
  t.same([p.appendonly, p.appendfsync], ['yes', 'everysec'], "replcast's own Redis: append-only file, fsync every second")
})

t.test('Redis killed with SIGKILL and restarted from its files: nothing is lost', async (t) => {
  const redis = await startPrivateRedis()
  t.teardown(() => redis.destroy())
  const h = await startApp(t, { REDIS_URL: redis.url })
  const sid = await createSession(h.url)
  const theirs = await createSession(h.url, {}, OTHER_KEY)
  t.equal(stdoutOf((await executeWithin(h.url, sid, 'x = 42\nprint("set")', { key: API_KEY })).events), 'set\n')
  const containers = (await containersOf(h.deployment)).map((c) => c.Id).sort()

  await redis.crash()
  t.equal((await api(h.url, 'GET', `/v1/sessions/${sid}`)).status, 503, 'the API answers 503 while Redis is down')
  await redis.start()
  t.ok(await waitFor(async () => (await api(h.url, 'GET', '/readyz')).status === 200, 20000), 'the API reconnected by itself')

  t.equal((await api(h.url, 'GET', `/v1/sessions/${sid}`)).body.status, 'ready', 'the session is still there')
  t.equal((await api(h.url, 'GET', `/v1/sessions/${theirs}`, undefined, { key: OTHER_KEY })).body.status, 'ready', "another tenant's session too")
  t.same(
    (await api(h.url, 'GET', '/v1/sessions')).body.sessions.map((s: { id: string }) => s.id),
    [sid],
    "the tenant's session list is intact",
  )
  t.same((await containersOf(h.deployment)).map((c) => c.Id).sort(), containers, 'their containers are still there')
  const r = await executeWithin(h.url, sid, 'print(x)', { key: API_KEY })
  t.equal(stdoutOf(r.events), '42\n', 'a variable set before the crash is readable after it')
  t.equal(stdoutOf((await executeWithin(h.url, theirs, 'print(1)', { key: OTHER_KEY })).events), '1\n', 'the other session runs code')
})
