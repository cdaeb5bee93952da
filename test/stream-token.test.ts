// EventSource tokens (?access_token=): a repeated parameter is a 401, never a 500, and tokens are
// signed and checked with the one secret in Redis, even after that secret changed (e.g. a Redis
// that lost its data).
import t from 'tap'
import { startApp } from './helpers/app.js'
import { api, createSession } from './helpers/client.js'
import { redisKeys } from '../src/store/keys.js'

t.test('stream tokens', async (t) => {
  const h = await startApp(t)
  const sid = await createSession(h.url)
  const run = await api(h.url, 'POST', `/v1/sessions/${sid}/executions`, { code: 'print(1)' })
  const eid = run.body.id as string
  const events = `/v1/sessions/${sid}/executions/${eid}/events`
  const mint = async () => (await api(h.url, 'POST', `${events}-token`)).body.token as string
  const read = (token: string) =>
    api(h.url, 'GET', `${events}?access_token=${encodeURIComponent(token)}`, undefined, { key: '', headers: { accept: 'text/event-stream' } })

  t.test('a repeated access_token is a 401 problem', async (t) => {
    const token = await mint()
    const r = await api(h.url, 'GET', `${events}?access_token=${token}&access_token=${token}`, undefined, {
      key: '',
      headers: { accept: 'text/event-stream' },
    })
    t.equal(r.status, 401)
    t.match(r.headers.get('content-type'), /application\/problem\+json/)
    t.equal(r.body.code, 'unauthorized')
  })

  t.test('minting and verifying read the same secret', async (t) => {
    const first = await read(await mint())
    t.equal(first.status, 200, 'a token works')
    t.match(first.body, /event: done/)
    // The secret is replaced (Redis lost it, or an operator rotated it): new tokens must work.
    await h.redis.del(redisKeys(h.prefix).secret())
    const second = await read(await mint())
    t.equal(second.status, 200, 'a token minted after the change works too')
    t.match(second.body, /event: done/)
  })
})
