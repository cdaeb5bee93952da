// A request that reaches an instance while it closes (on a kept-alive connection, or passed on by
// another instance) gets the contract's answer: 503 `unavailable` as problem+json with Retry-After,
// marked refused (another instance's hop then asks elsewhere), never Fastify's own JSON 503.
import t from 'tap'
import { Redis } from 'ioredis'
import { startApp } from './helpers/app.js'
import { startPrivateRedis } from './helpers/private-redis.js'
import { waitFor } from './helpers/wait.js'

t.test('an instance that is closing answers 503 problem+json with Retry-After, marked refused', async (t) => {
  const redis = await startPrivateRedis()
  t.teardown(() => redis.destroy())
  const h = await startApp(t, { REDIS_URL: redis.url })
  const url = h.url
  t.equal((await fetch(`${url}/healthz`)).status, 200, 'open, it answers')
  // Redis's writes held back: the instance's hand-over (its heartbeat withdrawn) cannot finish, so
  // it stays closing for as long as the test needs. The test's own connection lifts the pause.
  const admin = new Redis(redis.url)
  admin.on('error', () => undefined)
  await admin.call('CLIENT', 'PAUSE', '60000', 'WRITE')
  t.teardown(async () => {
    await admin.call('CLIENT', 'UNPAUSE').catch(() => undefined)
    admin.disconnect()
  })
  const closed = h.stop()
  let answer: Response | null = null
  t.ok(
    await waitFor(async () => {
      const res = await fetch(`${url}/healthz`)
      if (res.status === 200) {
        await res.body?.cancel()
        return false
      }
      answer = res
      return true
    }, 10000),
    'once it is closing, it refuses',
  )
  const res = answer as unknown as Response
  t.equal(res.status, 503)
  t.match(res.headers.get('content-type'), /^application\/problem\+json/, 'as problem+json')
  t.equal(res.headers.get('retry-after'), '1', 'with Retry-After')
  t.equal(res.headers.get('x-replcast-refused'), '1', 'marked refused, for a hop from another instance')
  t.equal(res.headers.get('connection'), 'close')
  const body = (await res.json()) as { code: string; status: number }
  t.equal(body.code, 'unavailable')
  t.equal(body.status, 503)
  await admin.call('CLIENT', 'UNPAUSE')
  await closed
})
