// A reader on the instance that appends an execution's events gets them handed over once Redis has
// stored them, without reading them back; it still gets every event once, in order, when it joins
// late, when an event reaches the log some other way (a gap), and when it is too slow to keep up.
import t, { type Test } from 'tap'
import { randomBytes } from 'node:crypto'
import { Redis } from 'ioredis'
import { pino } from 'pino'
import { EventFeed } from '../src/store/event-feed.js'
import type { ExecutionRecord, LoggedEvent } from '../src/store/records.js'
import { createStores } from '../src/store/stores.js'
import { startPrivateRedis } from './helpers/private-redis.js'
import { waitFor } from './helpers/wait.js'

const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'

async function setup(tt: Test) {
  const prefix = `replcast-test-feed-${randomBytes(4).toString('hex')}:`
  const redis = new Redis(redisUrl)
  const blocking = new Redis(redisUrl)
  const stores = createStores(redis, { prefix, eventMaxLen: 100_000, eventTtlS: 60 })
  let reads = 0
  const readEventPage = stores.logs.readEventPage.bind(stores.logs)
  stores.logs.readEventPage = (...args) => {
    reads++
    return readEventPage(...args)
  }
  const feed = new EventFeed(stores, blocking, pino({ level: 'silent' }))
  feed.start()
  tt.teardown(async () => {
    await feed.stop()
    const keys = await redis.keys(`${prefix}*`)
    if (keys.length) await redis.del(...keys)
    redis.disconnect()
    blocking.disconnect()
  })
  /** Appends like the execution runner does: stored, then handed to this instance's readers. */
  const append = async (eid: string, event: { type: string; [k: string]: unknown }) => {
    const added = await stores.logs.appendLive('ses_feed', eid, event, 'tenant-a')
    feed.deliver('ses_feed', eid, added)
  }
  const logged = async (eid: string) => (await redis.xrange(stores.keys.events('ses_feed', eid), '-', '+')).map(([id]) => id)
  return { logs: stores.logs, feed, append, logged, reads: () => reads }
}

function collect(feed: EventFeed, eid: string, opts: { after?: string; slow?: () => Promise<void> } = {}) {
  const seen: LoggedEvent[] = []
  const ac = new AbortController()
  const done = feed.follow(
    'ses_feed',
    eid,
    opts.after ?? '',
    async (e) => {
      seen.push(e)
      await opts.slow?.()
    },
    ac.signal,
    true,
  )
  return { seen, done, ac }
}

t.test('a local reader gets appended events without reading Redis for each', async (tt) => {
  const { feed, append, logged, reads } = await setup(tt)
  await append('exe_1', { type: 'status', state: 'running' })
  const r = collect(feed, 'exe_1')
  for (let i = 0; i < 20; i++) await append('exe_1', { type: 'stdout', text: `${i}\n` })
  await append('exe_1', { type: 'done', status: 'ok' })
  tt.equal(await r.done, true, 'it ended at done')
  tt.same(
    r.seen.map((e) => e.id),
    await logged('exe_1'),
    'every event once, in order, with its stream id',
  )
  tt.same(
    r.seen.filter((e) => e.type === 'stdout').map((e) => e.text),
    Array.from({ length: 20 }, (_, i) => `${i}\n`),
  )
  tt.ok(reads() <= 2, `Redis read ${reads()} time(s) for 22 events (the first page only)`)
})

t.test('an event that reached the log without being handed over is read from Redis, in its place', async (tt) => {
  const { logs, feed, append, logged } = await setup(tt)
  await append('exe_2', { type: 'status', state: 'running' })
  const r = collect(feed, 'exe_2')
  await append('exe_2', { type: 'stdout', text: 'a' })
  // Appended by someone else (another instance): this reader is not told.
  await logs.appendEvent('ses_feed', 'exe_2', { type: 'stdout', text: 'b' }, 'tenant-a')
  await append('exe_2', { type: 'stdout', text: 'c' })
  await append('exe_2', { type: 'done', status: 'ok' })
  tt.equal(await r.done, true)
  tt.same(
    r.seen.map((e) => e.text ?? e.type),
    ['status', 'a', 'b', 'c', 'done'],
  )
  tt.same(
    r.seen.map((e) => e.id),
    await logged('exe_2'),
  )
})

t.test('a reader that resumes after an id, and a reader too slow to keep up, each get every event once', async (tt) => {
  const { feed, append, logged } = await setup(tt)
  for (let i = 0; i < 5; i++) await append('exe_3', { type: 'stdout', text: `${i}` })
  const ids = await logged('exe_3')
  const resumed = collect(feed, 'exe_3', { after: ids[2] })
  let release!: () => void
  const gate = new Promise<void>((r) => (release = r))
  const slow = collect(feed, 'exe_3', { slow: () => gate })
  // Over a thousand events while the slow reader is stuck on its first: it drops what it was handed and reads Redis.
  await Promise.all(Array.from({ length: 1500 }, (_, i) => append('exe_3', { type: 'stdout', text: `${i + 5} ${'x'.repeat(2000)}` })))
  await append('exe_3', { type: 'done', status: 'ok' })
  release()
  tt.equal(await resumed.done, true)
  tt.equal(await slow.done, true)
  const all = await logged('exe_3')
  tt.same(
    resumed.seen.map((e) => e.id),
    all.slice(3),
    'the resumed reader: everything after its id',
  )
  tt.same(
    slow.seen.map((e) => e.id),
    all,
    'the slow reader: everything, once each, in order',
  )
})

t.test('a reader from the start given the first entries as appended reads nothing from Redis', async (tt) => {
  const { logs, feed, logged, reads } = await setup(tt)
  const first = await logs.appendLive('ses_feed', 'exe_4', { type: 'status', state: 'running' }, 'tenant-a')
  const seen: string[] = []
  const done = feed.follow('ses_feed', 'exe_4', '', (e) => void seen.push(e.id), new AbortController().signal, true, first!)
  for (const e of [
    { type: 'stdout', text: 'x' },
    { type: 'done', status: 'ok' },
  ])
    feed.deliver('ses_feed', 'exe_4', await logs.appendLive('ses_feed', 'exe_4', e, 'tenant-a'))
  tt.equal(await done, true)
  tt.same(seen, await logged('exe_4'))
  tt.equal(reads(), 0, 'no page read')
})

t.test('a reader woken by the events it waits for leaves no timer behind', async (tt) => {
  const { logs, feed } = await setup(tt)
  // The reader's long timers (its wake-up of last resort), seen through the global timer functions.
  const made: NodeJS.Timeout[] = []
  const pending = new Set<NodeJS.Timeout>()
  const { setTimeout: realSet, clearTimeout: realClear } = globalThis
  globalThis.setTimeout = ((fn: () => void, ms?: number) => {
    const timer = realSet(fn, ms)
    if ((ms ?? 0) >= 5000) {
      made.push(timer)
      pending.add(timer)
    }
    return timer
  }) as typeof setTimeout
  globalThis.clearTimeout = ((timer: NodeJS.Timeout) => {
    pending.delete(timer)
    realClear(timer)
  }) as typeof clearTimeout
  tt.teardown(() => Object.assign(globalThis, { setTimeout: realSet, clearTimeout: realClear }))
  const first = await logs.appendLive('ses_feed', 'exe_5', { type: 'status', state: 'running' }, 'tenant-a')
  const done = feed.follow('ses_feed', 'exe_5', '', () => undefined, new AbortController().signal, true, first!)
  for (const e of [
    { type: 'stdout', text: 'x' },
    { type: 'done', status: 'ok' },
  ]) {
    // The reader has taken what it had and waits (a turn of the event loop later).
    await new Promise((r) => setImmediate(r))
    feed.deliver('ses_feed', 'exe_5', await logs.appendLive('ses_feed', 'exe_5', e, 'tenant-a'))
  }
  tt.equal(await done, true)
  tt.equal(made.length, 2, 'it waited twice, each time with a timer of last resort')
  // Before: each wait's timer stayed for 10 s, and with it the reader and its client's reply.
  tt.equal(pending.size, 0, 'every one of them was cleared')
})

t.test('after a Redis restart, a new reader of a log another instance appends is woken at once, and the feed stops at once', async (tt) => {
  const redis = await startPrivateRedis({ persistent: false })
  tt.teardown(() => redis.destroy())
  const conn = new Redis(redis.url)
  const blocking = new Redis(redis.url)
  for (const c of [conn, blocking]) c.on('error', () => undefined)
  tt.teardown(() => conn.disconnect())
  const stores = createStores(conn, { prefix: 'replcast-test-feed:', eventMaxLen: 1000, eventTtlS: 60 })
  // Both executions run (their records are not what this test is about).
  stores.executions.getExecution = async () => ({ status: 'running' }) as ExecutionRecord
  const firstReads = new Map<string, () => void>()
  const readEventPage = stores.logs.readEventPage.bind(stores.logs)
  stores.logs.readEventPage = async (sid, eid, after, count) => {
    const page = await readEventPage(sid, eid, after, count)
    firstReads.get(eid)?.()
    return page
  }
  const feed = new EventFeed(stores, blocking, pino({ level: 'silent' }))
  feed.start()
  let stopped = false
  tt.teardown(() => (stopped ? undefined : feed.stop()))
  /** A reader of a log this instance does not append: resolves once it has read the log once. */
  const remoteReader = (eid: string) => {
    const seen: string[] = []
    const read = new Promise<void>((r) => firstReads.set(eid, r))
    const ac = new AbortController()
    tt.teardown(() => ac.abort())
    const done = feed.follow('ses_feed', eid, '', (e) => void seen.push(e.type), ac.signal, false)
    return { seen, done, read }
  }
  /** A client of Redis is blocked (flag b) in its XREAD now. */
  const blocked = async () =>
    String(await conn.client('LIST'))
      .split('\n')
      .some((l) => / flags=\w*b\w* /.test(l) && l.includes('cmd=xread'))
  const a = remoteReader('exe_a')
  await a.read
  tt.ok(await waitFor(blocked), 'the feed waits on Redis for the log')
  await redis.stop()
  await redis.start()
  await stores.logs.appendLive('ses_feed', 'exe_a', { type: 'stdout', text: 'a' }, 'tenant-a')
  tt.ok(await waitFor(() => a.seen.includes('stdout')), 'the reader from before the restart gets what is appended after it')
  tt.ok(await waitFor(blocked), 'the feed waits on Redis again')
  const b = remoteReader('exe_b')
  await b.read
  const appended = performance.now()
  await stores.logs.appendLive('ses_feed', 'exe_b', { type: 'done', status: 'ok' }, 'tenant-a')
  tt.equal(await b.done, true, 'a reader that joined after the restart gets its done')
  // Before: the feed's wake-up went to the connection from before the restart, and the new key
  // waited for the running blocking read to end (5 s).
  tt.ok(performance.now() - appended < 2500, 'without waiting out the blocking read under way')
  tt.ok(await waitFor(blocked), 'the feed waits on Redis again')
  const stopping = performance.now()
  stopped = true
  await feed.stop()
  tt.ok(performance.now() - stopping < 2500, 'stop ends the blocking read under way')
})
