// Two POST /restart of one session at the same time run one after the other: both succeed, the
// session ends up ready with one fresh interpreter, and it runs code.
import t from 'tap'
import { containersOf, startApp } from './helpers/app.js'
import { api, createSession, stdoutText } from './helpers/client.js'

t.test('concurrent restarts of one session are serialized', async (t) => {
  const h = await startApp(t)
  const sid = await createSession(h.url)
  for (let round = 0; round < 3; round++) {
    const set = await api(h.url, 'POST', `/v1/sessions/${sid}/executions`, { code: `kept = ${round}` })
    t.equal(set.body.status, 'ok')
    const [a, b] = await Promise.all([api(h.url, 'POST', `/v1/sessions/${sid}/restart`), api(h.url, 'POST', `/v1/sessions/${sid}/restart`)])
    t.same([a.status, b.status], [200, 200], `round ${round}: both restarts succeed (${a.status} ${a.body?.code ?? ''}, ${b.status} ${b.body?.code ?? ''})`)
    t.same([a.body.status, b.body.status], ['ready', 'ready'])
    const s = await api(h.url, 'GET', `/v1/sessions/${sid}`)
    t.equal(s.body.status, 'ready', 'the session is ready')
    const r = await api(h.url, 'POST', `/v1/sessions/${sid}/executions`, { code: 'print("kept" in globals())' })
    t.equal(stdoutText(r.body.events), 'False\n', 'it runs code in a fresh interpreter')
  }
  const running = (await containersOf(h.deployment)).filter((c) => c.State === 'running')
  t.equal(running.length, 1, 'one sandbox, running')
})
