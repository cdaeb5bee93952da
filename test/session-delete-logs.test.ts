// A deleted session's executions can no longer be read, so their logs and records leave Redis with
// it, at once, and the tenant's max_event_bytes gets their bytes back.
import t from 'tap'
import { startApp, type Harness } from './helpers/app.js'
import { api } from './helpers/client.js'
import { logEntries } from './helpers/logs.js'

/** The session's executions that have a log in Redis (a stream, or packed into the record). */
async function logsOf(h: Harness, sid: string): Promise<number> {
  let n = 0
  for (const key of await h.redis.keys(`${h.prefix}{${sid}}:exec:*`)) if ((await logEntries(h.redis, h.prefix, sid, key.split(':').at(-1)!)).length > 0) n++
  return n
}

t.test("deleting a session drops its executions' logs and gives their bytes back to the tenant", async (t) => {
  const h = await startApp(t)
  const total = async () => Number((await h.redis.get(`${h.prefix}tenant:alpha:event-bytes`)) ?? 0)
  const created = await api(h.url, 'POST', '/v1/sessions', {})
  t.equal(created.status, 201)
  const sid = created.body.id as string
  for (const code of ['print(1)', 'print("x" * 1000)', 'x = 1'])
    t.equal((await api(h.url, 'POST', `/v1/sessions/${sid}/executions`, { code })).body.status, 'ok')
  const keysOf = async () => (await h.redis.keys(`${h.prefix}{${sid}}:*`)).filter((k) => /:(events|exec):/.test(k))
  t.equal(await logsOf(h, sid), 3, 'three logs and three records while the session lives')
  t.ok((await keysOf()).length >= 3)
  t.ok((await total()) > 1000, 'their bytes are counted against the tenant')

  t.equal((await api(h.url, 'DELETE', `/v1/sessions/${sid}`)).status, 204)
  t.same(await keysOf(), [], 'no log or record left')
  t.equal(await total(), 0, "the tenant's event bytes are back to zero")
  t.equal(await h.redis.hlen(`${h.prefix}tenant:alpha:log-bytes`), 0)
  t.equal(await h.redis.zcard(`${h.prefix}tenant:alpha:ended-logs`), 0)
})

t.test('executions the session lists no more (past the latest 100) go with it too', async (t) => {
  const h = await startApp(t)
  const sid = (await api(h.url, 'POST', '/v1/sessions', {})).body.id as string
  for (let i = 0; i < 105; i++) t.equal((await api(h.url, 'POST', `/v1/sessions/${sid}/executions`, { code: `${i}` })).status, 200)
  const logs = () => logsOf(h, sid)
  t.equal(await logs(), 105, 'every log while the session lives')
  t.equal(await h.redis.llen(`${h.prefix}{${sid}}:executions`), 100, 'the session lists the latest 100')
  t.equal((await api(h.url, 'DELETE', `/v1/sessions/${sid}`)).status, 204)
  t.equal(await logs(), 0, 'none left after the delete')
  t.equal(Number((await h.redis.get(`${h.prefix}tenant:alpha:event-bytes`)) ?? 0), 0)
})
