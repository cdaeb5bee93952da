// A restart and a delete of one session at the same time (or the reaper's delete of an idle one):
// the delete wins, the restart answers 200 or 404 (never a 5xx), and nothing is left behind.
import t from 'tap'
import { containersOf, startApp } from './helpers/app.js'
import { api, createSession } from './helpers/client.js'
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
      t.ok(await waitFor(async () => (await api(h.url, 'GET', `/v1/sessions/${sid}`)).body?.status === 'starting', 10_000), `${order}: restarting`)
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
