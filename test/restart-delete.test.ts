// A restart and a delete of one session at the same time (or the reaper's delete of an idle one):
// the delete wins, the restart answers 200 or 404 (never a 5xx), and nothing is left behind. Code
// sent while a delete removes the sandbox waits for it and finds no session.
import t from 'tap'
import { containersOf, startApp } from './helpers/app.js'
import { api, createSession, executeSse, stdoutOf } from './helpers/client.js'
import { startDockerProxy } from './helpers/docker-proxy.js'
import { waitFor } from './helpers/wait.js'

t.test('a restart racing a delete answers 200 or 404, and the session is gone', async (t) => {
  const h = await startApp(t)
  for (const order of ['delete during the restart', 'restart during the delete', 'both at once']) {
    const sid = await createSession(h.url)
    let restart: Promise<Awaited<ReturnType<typeof api>>>
    let del: Promise<Awaited<ReturnType<typeof api>>>
    if (order === 'delete during the restart') {
      restart = api(h.url, 'POST', `/v1/sessions/${sid}/restart`)
      // The restart has begun once the session says it is starting again.
      t.ok(await waitFor(async () => (await api(h.url, 'GET', `/v1/sessions/${sid}`)).body?.status === 'starting', 30_000), `${order}: restarting`)
      del = api(h.url, 'DELETE', `/v1/sessions/${sid}`)
    } else if (order === 'restart during the delete') {
      del = api(h.url, 'DELETE', `/v1/sessions/${sid}`)
      restart = api(h.url, 'POST', `/v1/sessions/${sid}/restart`)
    } else {
      ;[restart, del] = [api(h.url, 'POST', `/v1/sessions/${sid}/restart`), api(h.url, 'DELETE', `/v1/sessions/${sid}`)]
    }
    const [r, d] = await Promise.all([restart, del])
    t.equal(d.status, 204, `${order}: the delete succeeds (${d.status} ${d.body?.code ?? ''})`)
    t.ok(r.status === 200 || r.status === 404, `${order}: the restart answers 200 or 404 (${r.status} ${r.body?.code ?? ''}: ${r.body?.detail ?? ''})`)
    t.equal((await api(h.url, 'GET', `/v1/sessions/${sid}`)).status, 404, `${order}: the session is gone`)
    const left = async () => (await containersOf(h.deployment)).filter((c) => c.Labels['replcast.session'] === sid).length
    t.ok(await waitFor(async () => (await left()) === 0, 15_000), `${order}: its container is gone`)
  }
})

t.test('code sent while a delete removes the sandbox finds no session (404) and runs nowhere', async (t) => {
  const proxy = await startDockerProxy()
  t.teardown(() => proxy.close())
  const h = await startApp(t, { DOCKER_HOST: proxy.host })
  const sid = await createSession(h.url)
  const releaseRemove = proxy.hang(/^DELETE \/containers\//)
  const del = api(h.url, 'DELETE', `/v1/sessions/${sid}`)
  t.ok(await waitFor(async () => proxy.held() > 0, 30_000), 'the delete is removing the sandbox (held)')
  // Redis seeing the execution's read of the session's record: the request is past the check a deleted session fails.
  const monitor = await h.redis.monitor()
  t.teardown(() => monitor.disconnect())
  const recordKey = `${h.prefix}{${sid}}:session`
  const recordRead = new Promise<void>((resolve) => monitor.on('monitor', (_time: string, args: string[]) => args[1] === recordKey && resolve()))
  const run = executeSse(h.url, sid, 'print("ran")')
  await recordRead
  releaseRemove()
  const [r, d] = await Promise.all([run, del])
  t.equal(d.status, 204, `the delete succeeds (${d.status} ${d.body?.code ?? ''})`)
  t.equal(r.status, 404, `the execution finds no session (${r.status} ${stdoutOf(r.events)})`)
  t.equal(r.events[0]?.data.code, 'session_not_found')
  const left = async () => (await h.redis.keys(`${h.prefix}*${sid}*`)).sort()
  t.ok(await waitFor(async () => (await left()).length === 0, 30_000), 'nothing of the session is left in Redis')
  t.same(await left(), [])
  t.same(
    (await containersOf(h.deployment)).filter((c) => c.Labels['replcast.session'] === sid),
    [],
    'its container is gone',
  )
})
