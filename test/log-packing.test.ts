// A small ended log is packed into its execution's record when the session's next execution starts:
// Redis then keeps a few hundred bytes for a print(1) instead of a stream's 1.2 kB, and every reader
// (GET, SSE from the start or from a Last-Event-ID) gets the same events with the same ids as before.
// Large logs stay streams; packed logs stay counted against the tenant's max_event_bytes until they expire.
import t from 'tap'
import { API_KEY, startApp, type Harness } from './helpers/app.js'
import { api, readSse } from './helpers/client.js'
import { logEntries } from './helpers/logs.js'
import { waitFor } from './helpers/wait.js'
import { redisKeys } from '../src/store/keys.js'

async function run(h: Harness, sid: string, code: string): Promise<string> {
  const r = await api(h.url, 'POST', `/v1/sessions/${sid}/executions`, { code })
  if (r.body.status !== 'ok') throw new Error(`execution answered ${JSON.stringify(r.body)}`)
  return r.body.id as string
}

async function events(h: Harness, sid: string, eid: string, lastEventId?: string): Promise<Response> {
  return fetch(`${h.url}/v1/sessions/${sid}/executions/${eid}/events`, {
    headers: { authorization: `Bearer ${API_KEY}`, accept: 'text/event-stream', ...(lastEventId ? { 'last-event-id': lastEventId } : {}) },
  })
}

t.test("a print(1)'s log is packed into its record once the next execution starts, and reads the same", async (t) => {
  const h = await startApp(t)
  const keys = redisKeys(h.prefix)
  const sid = (await api(h.url, 'POST', '/v1/sessions', {})).body.id as string
  const large = await run(h, sid, 'print("x" * 2000)')
  const small = await run(h, sid, 'print(1)')
  const before = await api(h.url, 'GET', `/v1/sessions/${sid}/executions/${small}`)
  const sse = await readSse(await events(h, sid, small))
  const counted = await h.redis.hget(keys.tenantLogBytes('alpha'), `${sid}/${small}`)
  t.equal(await h.redis.exists(keys.events(sid, small)), 1, 'the log of the latest execution is a stream')

  await run(h, sid, 'pass')
  t.equal(await h.redis.exists(keys.events(sid, small)), 0, 'the earlier small log is a stream no more')
  t.equal(await h.redis.exists(keys.events(sid, large)), 1, 'the earlier large one still is')
  const record = keys.execution(sid, small)
  t.equal(await h.redis.object('ENCODING', record), 'listpack', 'its record stays a compact hash')
  const bytes = (await h.redis.memory('USAGE', record)) ?? 0
  t.ok(bytes < 800, `record and log take ${bytes} B together`)
  t.ok((await h.redis.ttl(record)) > 0, 'and expire together')
  t.equal(await h.redis.hget(keys.tenantLogBytes('alpha'), `${sid}/${small}`), counted, "the tenant's event bytes still count it")

  t.same((await api(h.url, 'GET', `/v1/sessions/${sid}/executions/${small}`)).body, before.body, 'GET answers the same')
  const again = await readSse(await events(h, sid, small))
  t.same(
    again.map((e) => [e.id, e.event, e.data]),
    sse.map((e) => [e.id, e.event, e.data]),
    'SSE from the start: the same events with the same ids',
  )
  t.same(
    (await readSse(await events(h, sid, small, sse[0]!.id))).map((e) => e.id),
    sse.slice(1).map((e) => e.id),
    'SSE after a Last-Event-ID: the rest of them',
  )
  const after = await events(h, sid, small, sse.at(-1)!.id)
  t.equal(after.status, 204, 'after its done: nothing more')
  t.same(
    (await logEntries(h.redis, h.prefix, sid, small)).map(([id]) => id),
    sse.map((e) => e.id),
  )
})

t.test('a packed log that expires gives its bytes back to the tenant', async (t) => {
  const h = await startApp(t, { EVENT_LOG_TTL_S: '10' })
  const keys = redisKeys(h.prefix)
  const sid = (await api(h.url, 'POST', '/v1/sessions', {})).body.id as string
  const first = await run(h, sid, 'print(1)')
  await run(h, sid, 'print(2)')
  await run(h, sid, 'print(3)')
  t.equal(await h.redis.exists(keys.events(sid, first)), 0, 'the first log is packed')
  t.ok(await waitFor(async () => (await h.redis.exists(keys.execution(sid, first))) === 0, 30000, 200), 'its record expired with it')
  // The next execution's end sweeps the tenant's expired logs.
  const last = await run(h, sid, 'print(4)')
  const counted = await h.redis.hgetall(keys.tenantLogBytes('alpha'))
  t.notOk(`${sid}/${first}` in counted, 'it is counted no more')
  const sum = Object.values(counted).reduce((a, n) => a + Number(n), 0)
  t.equal(Number(await h.redis.get(keys.tenantEventBytes('alpha'))), sum, "the tenant's total is the sum of the logs it still has")
  t.ok(`${sid}/${last}` in counted)
})
