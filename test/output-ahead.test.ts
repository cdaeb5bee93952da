// Output written after a pause, and the end of an execution (the output that came with its `done`,
// then the `done`), reach the SSE readers on the instance that runs it as soon as that instance has
// sent them to Redis, before Redis has stored them, under the ids Redis gives them afterwards: a
// log's entries after its first take the id after the last one's, so the instance knows them. What
// Redis then holds is what the reader saw.
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { Redis } from 'ioredis'
import { API_KEY, startApp, testEnv } from './helpers/app.js'
import { createSession, readSse, type SseEvent } from './helpers/client.js'
import { startPrivateRedis, writePauser } from './helpers/private-redis.js'
import { touch } from './helpers/sandbox-signal.js'
import { waitFor } from './helpers/wait.js'
import { redisKeys } from '../src/store/keys.js'
import { appendedAhead } from '../src/store/event-bytes.js'
import { createStores } from '../src/store/stores.js'

t.test("Redis gives an execution's end the ids predicted from where its log ended, once, whatever the tenant's budget", async (t) => {
  const prefix = `replcast-test-ahead-${randomBytes(4).toString('hex')}:`
  const redis = new Redis(testEnv().REDIS_URL!)
  t.teardown(async () => {
    const keys = await redis.keys(`${prefix}*`)
    if (keys.length) await redis.del(...keys)
    redis.disconnect()
  })
  // Room for a status and a line of output, not for the 300 bytes that come with the done.
  const { executions, logs } = createStores(redis, { prefix, eventMaxLen: 1000, eventTtlS: 60, eventBytesLimit: () => 400 })
  const before = [{ type: 'stdout', text: 'x'.repeat(300) }]
  const done = { type: 'done', status: 'ok' }

  const status = await logs.appendLive('s1', 'e1', { type: 'status', state: 'running' }, 'alpha')
  const [ms, seq] = status!.events[0]!.id.split('-')
  const out = await logs.appendLiveMany('s1', 'e1', [{ type: 'stdout', text: 'a\n' }], 'alpha')
  t.equal(out!.events[0]!.id, `${ms}-${Number(seq) + 1}`, "an entry after the log's first takes the id after the last one's")

  const ahead = appendedAhead(out!.events[0]!.id, before, done)!
  const expected = ahead.events.at(-1)!.id
  const added = await executions.recordEnd('s1', 'e1', 'alpha', done, { status: 'ok' }, null, before, expected)
  t.same(
    added!.events.map((e) => e.id),
    ahead.events.map((e) => e.id),
    'Redis gave the end the ids it was expected to',
  )
  t.same(
    added!.events.map((e) => e.type),
    ['stdout', 'done'],
    "the output that came with the end is kept past the tenant's budget",
  )
  t.equal(
    await executions.recordEnd('s1', 'e1', 'alpha', done, { status: 'ok' }, null, before, expected),
    null,
    'the same end again (a retry after a lost reply) adds nothing',
  )
  t.same(
    (await logs.readEvents('s1', 'e1', '')).map((e) => e.type),
    ['status', 'stdout', 'stdout', 'done'],
    'the log has one done',
  )

  // A jump (the limit event of output lost while no instance was attached) leaves the log's milliseconds.
  const status3 = await logs.appendLive('s3', 'e3', { type: 'status', state: 'running' }, 'alpha')
  const [ms3] = status3!.events[0]!.id.split('-')
  const jumped = await logs.appendLiveMany('s3', 'e3', [{ type: 'limit', what: 'detached_output' }], 'alpha', 'jump')
  const next = await logs.appendLiveMany('s3', 'e3', [{ type: 'stdout', text: 'b\n' }], 'alpha')
  t.same(
    [jumped!.events[0]!.id, next!.events[0]!.id],
    [`${Number(ms3) + 1}-0`, `${Number(ms3) + 1}-1`],
    "a jump takes the next millisecond, past every id the log's own could have given; the entries after it follow on",
  )

  // Without an expected id the same end is held to the budget, as any output is.
  await logs.appendLive('s2', 'e2', { type: 'status', state: 'running' }, 'beta')
  const plain = await executions.recordEnd('s2', 'e2', 'beta', done, { status: 'ok' }, null, before)
  t.same(
    plain!.events.map((e) => e.type),
    ['limit', 'done'],
    'unexpected, the output past the budget is refused and counted',
  )
})

/** Starts `code` in the session with an SSE reader; `seen(pred)` resolves once the reader has an event `pred` accepts. */
async function run(url: string, sid: string, code: string) {
  const res = await fetch(`${url}/v1/sessions/${sid}/executions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({ code }),
  })
  const waits: Array<{ pred: (e: SseEvent) => boolean; resolve: () => void }> = []
  const got: SseEvent[] = []
  const read = readSse(res, (e) => {
    got.push(e)
    for (const w of waits.filter((w) => w.pred(e))) w.resolve()
    return false
  })
  const seen = (pred: (e: SseEvent) => boolean) => (got.some(pred) ? Promise.resolve() : new Promise<void>((resolve) => waits.push({ pred, resolve })))
  return { status: res.status, eid: res.headers.get('location')!.split('/').pop()!, read, seen }
}

/**
 * Code that writes `first` (one write of 2 KB: too large to be handed to readers before Redis has
 * stored it, so a reader that has it knows its instance has Redis's reply), then waits for each of
 * `waits` (files the test creates), writing `then` after the first.
 */
const gated = (then: string | null, waits: string[]) =>
  [
    'import os, time',
    'os.write(1, b"first " + b"x" * 2000 + b"\\n")',
    ...waits.flatMap((w, i) => [`while not os.path.exists("${w}"):`, '    time.sleep(0.005)', ...(i === 0 && then ? [`os.write(1, b"${then}\\n")`] : [])]),
  ].join('\n')
const FIRST = `first ${'x'.repeat(2000)}\n`

const stdoutIs = (text: string) => (e: SseEvent) => e.event === 'stdout' && e.data.text === text
const isDone = (json: string) => JSON.parse(json).type === 'done'

t.test('a local SSE reader gets output and the end while Redis cannot store them, and Redis then stores what the reader saw', async (t) => {
  const redis = await startPrivateRedis()
  t.teardown(() => redis.destroy())
  const h = await startApp(t, { REDIS_URL: redis.url })
  const sid = await createSession(h.url)
  const { admin, pause } = writePauser(t, redis.url)
  const logOf = async (eid: string) => (await admin.xrange(redisKeys(h.prefix).events(sid, eid), '-', '+')).map(([id, [, json]]) => ({ id, json: json! }))
  const shape = (e: { id: string; type: string; text?: string }) => `${e.id} ${e.type}${e.text ? ` ${e.text}` : ''}`
  const sameAsStored = async (eid: string, events: SseEvent[]) =>
    t.same(
      (await logOf(eid)).map(({ id, json }) => shape({ ...JSON.parse(json), id })),
      events.map((e) => shape({ id: e.id, type: e.event, text: e.data.text })),
      'Redis holds the events the reader saw, under the same ids',
    )

  // Output after a pause, while nothing of its execution is on its way to Redis.
  const one = await run(h.url, sid, gated('then', ['/tmp/go1', '/tmp/go2']))
  t.equal(one.status, 200)
  await one.seen(stdoutIs(FIRST))
  await pause(true)
  await touch(sid, '/tmp/go1')
  await one.seen(stdoutIs('then\n'))
  t.notOk(
    (await logOf(one.eid)).some(({ json }) => json.includes('then')),
    'the reader got output Redis had not stored',
  )
  await pause(false)
  await touch(sid, '/tmp/go2')
  const events1 = await one.read
  t.same(
    events1.map((e) => (e.event === 'stdout' ? `stdout ${e.data.text}` : e.event)),
    ['status', `stdout ${FIRST}`, 'stdout then\n', 'done'],
    'the reader got the whole execution once',
  )
  t.ok(await waitFor(async () => (await logOf(one.eid)).some(({ json }) => isDone(json))))
  await sameAsStored(one.eid, events1)

  // The end (nothing is printed after the wait: output sent on its own is then on its way to Redis,
  // and the end goes ahead only when nothing of its execution is).
  const two = await run(h.url, sid, gated(null, ['/tmp/go3']))
  await two.seen(stdoutIs(FIRST))
  await pause(true)
  await touch(sid, '/tmp/go3')
  const events2 = await two.read
  const heldThen = await logOf(two.eid)
  await pause(false)
  t.same(
    events2.map((e) => e.event),
    ['status', 'stdout', 'done'],
    'the reader got the whole execution, its end included',
  )
  t.equal(events2.at(-1)?.data.status, 'ok')
  t.notOk(
    heldThen.some(({ json }) => isDone(json)),
    'while Redis held no done',
  )
  t.ok(await waitFor(async () => (await logOf(two.eid)).some(({ json }) => isDone(json))), 'once Redis writes again, the end is stored')
  await sameAsStored(two.eid, events2)
})
