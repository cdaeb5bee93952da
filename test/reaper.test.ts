// The reaper loses nothing and is stopped by nothing: sessions claimed by an instance that died
// before handling them are reaped once its claim lapses, and one Docker call that hangs holds up
// only its own session.
import t from 'tap'
import { containersOf, startApp } from './helpers/app.js'
import { api, createSession } from './helpers/client.js'
import { startDockerProxy } from './helpers/docker-proxy.js'
import { waitFor } from './helpers/wait.js'
import { createStores } from '../src/store/stores.js'
import { redisKeys } from '../src/store/keys.js'

const FAST = { REAPER_INTERVAL_MS: '100', DOCKER_TIMEOUT_MS: '500' }

const gone = async (url: string, sid: string) => (await api(url, 'GET', `/v1/sessions/${sid}`)).status === 404
const containerOf = async (deployment: string, sid: string) => (await containersOf(deployment)).find((c) => c.Labels['replcast.session'] === sid)

t.test('a session claimed by an instance that died before handling it is still reaped', async (t) => {
  const h = await startApp(t, FAST)
  const sid = await createSession(h.url, { idle_timeout_s: 2 })
  const deadline = Number(await h.redis.zscore(redisKeys(h.prefix).deadlines(), sid))
  t.ok(deadline > Date.now(), 'not yet due')
  // Another instance claims the session as due (its clock a little ahead) and dies at once.
  const other = createStores(h.redis, { prefix: h.prefix, eventMaxLen: 100, eventTtlS: 60 })
  t.same(await other.sessions.claimDue(deadline, 2000), [sid], 'the other instance claimed it')
  t.ok(await waitFor(() => gone(h.url, sid), 20000), 'the session was reaped all the same')
  t.notOk(await containerOf(h.deployment, sid), 'and its container removed')
})

t.test('one hung Docker call does not stop the reaping of other sessions', async (t) => {
  const proxy = await startDockerProxy()
  t.teardown(() => proxy.close())
  const h = await startApp(t, { ...FAST, DOCKER_HOST: proxy.host })
  const stuck = await createSession(h.url, { idle_timeout_s: 1 })
  const other = await createSession(h.url, { idle_timeout_s: 1 })
  const { Id } = (await containerOf(h.deployment, stuck))!
  // The engine never answers the removal of the first session's container.
  const release = proxy.hang(new RegExp(`^DELETE /containers/${Id}`))
  t.ok(await waitFor(() => proxy.held() > 0, 15000), "the first session's removal hangs")
  t.ok(await waitFor(() => gone(h.url, other), 15000), 'the other session is reaped meanwhile')
  t.notOk(await containerOf(h.deployment, other), 'and its container removed')
  t.ok(await containerOf(h.deployment, stuck), "the stuck session's container is still there")
  release()
  t.ok(await waitFor(() => gone(h.url, stuck), 20000), 'once the engine answers again, the stuck session is reaped too')
  t.ok(await waitFor(async () => !(await containerOf(h.deployment, stuck)), 30_000), 'and its container removed')
})
