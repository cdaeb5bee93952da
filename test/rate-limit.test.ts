// rate_per_min per tenant: counted in memory on each instance (no Redis round trip per request) and
// reconciled through Redis, so that it holds across instances.
import t from 'tap'
import type { Redis } from 'ioredis'
import { API_KEY, OTHER_KEY, startApp } from './helpers/app.js'
import { waitFor } from './helpers/wait.js'

// A fixed minute, so no test straddles the minute's end.
const MINUTE = 29_000_000 * 60_000
const now = () => MINUTE + 30_000

async function list(url: string, key = API_KEY): Promise<Response> {
  return fetch(`${url}/v1/sessions`, { headers: { authorization: `Bearer ${key}` } })
}

async function incrCalls(redis: Redis): Promise<number> {
  const info = await redis.info('commandstats')
  let n = 0
  for (const m of info.matchAll(/^cmdstat_(incr|incrby):calls=(\d+)/gm)) n += Number(m[2])
  return n
}

t.test('one instance admits exactly rate_per_min requests of a tenant a minute, then 429 until the minute ends', async (t) => {
  const h = await startApp(t, { TENANT_RATE_PER_MIN: '20' }, { now })
  const answers = await Promise.all(Array.from({ length: 30 }, () => list(h.url)))
  const statuses = answers.map((r) => r.status)
  t.equal(statuses.filter((s) => s === 200).length, 20, '20 admitted')
  t.equal(statuses.filter((s) => s === 429).length, 10, 'the rest refused')
  const refused = answers.find((r) => r.status === 429)!
  t.equal(refused.headers.get('retry-after'), '30', 'Retry-After: the seconds left in the minute')
  t.match(await refused.json(), { code: 'rate_limited' })
  t.equal((await list(h.url, OTHER_KEY)).status, 200, 'another tenant is not affected')
})

t.test('requests after the first of a minute are counted without a Redis command each', async (t) => {
  const h = await startApp(t, { TENANT_RATE_PER_MIN: '100000' }, { now })
  await list(h.url)
  const before = await incrCalls(h.redis)
  for (let i = 0; i < 60; i++) t.equal((await list(h.url)).status, 200)
  const after = await incrCalls(h.redis)
  t.ok(after - before < 30, `${after - before} INCR/INCRBY commands for 60 requests`)
  // ...and they reach Redis all the same.
  const key = `${h.prefix}tenant:alpha:rate:${MINUTE / 60_000}`
  t.ok(await waitFor(async () => Number(await h.redis.get(key)) === 61), 'the count of all 61 requests reaches Redis')
})

t.test('two instances on one Redis share the limit', async (t) => {
  const a = await startApp(t, { TENANT_RATE_PER_MIN: '30' }, { now })
  const b = await startApp(t, { TENANT_RATE_PER_MIN: '30', REPLCAST_KEY_PREFIX: a.prefix, REPLCAST_DEPLOYMENT: a.deployment }, { now })
  for (let i = 0; i < 20; i++) t.equal((await list(a.url)).status, 200)
  const key = `${a.prefix}tenant:alpha:rate:${MINUTE / 60_000}`
  t.ok(await waitFor(async () => Number(await a.redis.get(key)) === 20), "instance A's 20 requests are counted in Redis")
  const onB = await Promise.all(Array.from({ length: 15 }, () => list(b.url)))
  t.equal(onB.filter((r) => r.status === 200).length, 10, 'B admits only what is left of the minute')
})
