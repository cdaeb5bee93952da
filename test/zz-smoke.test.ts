import t from 'tap'
import { startApp } from './helpers/app.js'
import { api, createSession, executeSse, stdoutOf } from './helpers/client.js'
t.test('smoke', async (t) => {
  const h = await startApp(t)
  const t0 = performance.now()
  const sid = await createSession(h.url)
  console.log('created', sid, performance.now() - t0)
  const r = await executeSse(h.url, sid, "import time\nprint('a')\ntime.sleep(1)\nprint('b')\n1+1")
  console.log(JSON.stringify(r.events.map(e => [e.event, e.data, Math.round(e.at)])))
  const j = await api(h.url, 'POST', `/v1/sessions/${sid}/executions`, { code: 'x = 5\nx*2' })
  console.log(j.status, JSON.stringify(j.body))
  t.ok(true)
})
