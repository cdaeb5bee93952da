// Engines (src/sessions/supply/engines.ts) over an in-memory engine report: where a new session goes (the
// live engine with the most free memory, ties and failures here), and whether a session's sandbox is
// reachable from here, through instances on its engine, or nowhere any more; and REDIS_SENTINELS.
import t from 'tap'
import { pino } from 'pino'
import { loadConfig, parseSentinels } from '../../src/config.js'
import { AppError } from '../../src/errors.js'
import { Engines, SessionOnOtherEngine } from '../../src/sessions/supply/engines.js'
import type { EngineReport, EngineStore } from '../../src/store/engine-store.js'
import { connectRedis } from '../../src/store/redis-connect.js'

const GIB = 1024 ** 3
const config = loadConfig({ REPLCAST_API_KEYS: 'alpha=test-key-alpha-0001', REPLCAST_INSTANCE_ID: 'me' })

function engines(opts: { here: number; others: EngineReport[]; instances: Record<string, string[]>; failing?: boolean }) {
  const store = {
    report: async () => undefined,
    withdraw: async () => undefined,
    live: async () => {
      if (opts.failing) throw new Error('redis is away')
      return opts.others
    },
    instances: async (id: string) => opts.instances[id] ?? [],
  } as unknown as EngineStore
  const e = new Engines({
    config,
    driver: { engineId: async () => 'E-here' },
    capacity: { figures: async () => ({ totalBytes: 16 * GIB, freeBytes: opts.here, sandboxes: 0 }) },
    store,
    log: pino({ level: 'silent' }),
    records: { getSession: async (sid: string) => (sid === 'ses_far' ? ({ id: sid, engine: 'E-far' } as never) : null) },
  })
  return e
}
const report = (id: string, freeGib: number): EngineReport => ({ id, freeBytes: freeGib * GIB, totalBytes: 16 * GIB, sandboxes: 1, updatedAt: Date.now() })

t.test('a new session goes to the live engine with the most free memory', async (t) => {
  const e = engines({ here: 1 * GIB, others: [report('E-here', 1), report('E-b', 4), report('E-c', 9)], instances: { 'E-b': ['b1'], 'E-c': ['c1', 'c2'] } })
  await e.start()
  t.same(await e.place(), { engine: 'E-c', instances: ['c1', 'c2'] })
})

t.test('an engine without a live instance is skipped; ties, a fuller engine elsewhere, and Redis failures stay here', async (t) => {
  const noInstance = engines({ here: 1 * GIB, others: [report('E-c', 9), report('E-b', 4)], instances: { 'E-b': ['b1'] } })
  await noInstance.start()
  t.same(await noInstance.place(), { engine: 'E-b', instances: ['b1'] }, 'the next best with an instance')
  const tie = engines({ here: 4 * GIB, others: [report('E-b', 4)], instances: { 'E-b': ['b1'] } })
  await tie.start()
  t.equal(await tie.place(), null, 'a tie stays here')
  const fuller = engines({ here: -1 * GIB, others: [report('E-b', -2)], instances: { 'E-b': ['b1'] } })
  await fuller.start()
  t.equal(await fuller.place(), null, 'an engine fuller than this one is not chosen')
  const failing = engines({ here: 0, others: [], instances: {}, failing: true })
  await failing.start()
  t.equal(await failing.place(), null)
  t.equal(await engines({ here: 0, others: [report('E-b', 9)], instances: { 'E-b': ['b1'] } }).place(), null, 'before start: here')
})

t.test("a session's sandbox: here, through its engine's instances, or stranded", async (t) => {
  const e = engines({ here: 0, others: [], instances: { 'E-far': ['f1'] } })
  await e.start()
  t.same(await e.whereIs({ engine: 'E-here' }), { here: true })
  t.same(await e.whereIs({}), { here: true }, 'a record from before engines were recorded')
  t.same(await e.whereIs({ engine: 'E-far' }), { here: false, engine: 'E-far', instances: ['f1'] })
  const moved = await e.mustBeHere({ engine: 'E-far' }).catch((x: unknown) => x)
  t.ok(
    moved instanceof SessionOnOtherEngine && moved.instances[0] === 'f1' && moved.status === 503,
    'a request here for it: passed on (503 with Retry-After meanwhile)',
  )
  t.equal(await e.instanceFor('ses_far'), 'f1', 'a request for it goes to an instance there')
  t.equal(await e.instanceFor('ses_gone'), null)
  const stranded = await e.whereIs({ engine: 'E-none' })
  t.same(stranded, { here: false, engine: 'E-none', instances: [] })
  const err = await e.mustBeHere({ engine: 'E-none' }).catch((x: unknown) => x)
  t.ok(err instanceof AppError && err.code === 'session_dead' && /E-none.*no API instance/.test(err.message), 'stranded: session_dead saying why')
})

t.test('REDIS_SENTINELS: host:port lists, a default port, v6 addresses; a bad one stops the start naming the variable', async (t) => {
  t.same(parseSentinels(' a:26380, b ,[::1]:5000'), [
    { host: 'a', port: 26380 },
    { host: 'b', port: 26379 },
    { host: '::1', port: 5000 },
  ])
  t.same(parseSentinels(''), [])
  t.same(
    loadConfig({ REPLCAST_API_KEYS: 'alpha=test-key-alpha-0001', REDIS_SENTINELS: 'a:26380' }).redisSentinels,
    [{ host: 'a', port: 26380 }],
    'parsed once, kept in the config',
  )
  t.throws(() => loadConfig({ REPLCAST_API_KEYS: 'alpha=test-key-alpha-0001', REDIS_SENTINELS: 'a:b:c' }), /invalid REDIS_SENTINELS/)
})

t.test("REDIS_URL: a URL or a unix socket's path; with sentinels only a URL (it gives their credentials and database)", async (t) => {
  const keys = { REPLCAST_API_KEYS: 'alpha=test-key-alpha-0001' }
  t.equal(loadConfig({ ...keys, REDIS_URL: '/run/redis/redis.sock' }).REDIS_URL, '/run/redis/redis.sock')
  const redis = connectRedis(loadConfig({ ...keys, REDIS_URL: '/run/redis/redis.sock' }), { lazyConnect: true })
  t.equal(redis.options.path, '/run/redis/redis.sock', 'ioredis connects through the socket')
  redis.disconnect()
  t.throws(() => loadConfig({ ...keys, REDIS_URL: '/run/redis/redis.sock', REDIS_SENTINELS: 'a:26379' }), /invalid REDIS_URL=.*must be a redis:\/\/ URL/)
  t.ok(loadConfig({ ...keys, REDIS_URL: 'redis://:secret@x/2', REDIS_SENTINELS: 'a:26379' }), 'a URL with sentinels is fine')
})
