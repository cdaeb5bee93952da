// The Docker engine failing the kill after an ignored interrupt: the execution still ends, with a
// `done` and an error saying why, and the session is collected by the reaper (its container removed).
import t from 'tap'
import { API_KEY, containersOf, startApp } from './helpers/app.js'
import { api, createSession, stdoutText } from './helpers/client.js'
import { startDockerProxy } from './helpers/docker-proxy.js'
import { executeWithin } from './helpers/neighbour.js'
import { waitFor } from './helpers/wait.js'

const GRACE_MS = 300
const DOCKER_TIMEOUT_MS = 500

t.test('a kill the engine never answers: the execution ends and the session is collected', async (t) => {
  const proxy = await startDockerProxy()
  t.teardown(() => proxy.close())
  const h = await startApp(t, {
    DOCKER_HOST: proxy.host,
    DOCKER_TIMEOUT_MS: String(DOCKER_TIMEOUT_MS),
    INTERRUPT_GRACE_MS: String(GRACE_MS),
    REAPER_INTERVAL_MS: '100',
  })
  const sid = await createSession(h.url)
  const neighbour = await createSession(h.url)
  proxy.hang(/^POST \/containers\/[^/]+\/kill/)
  const code = 'import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    time.sleep(0.05)'
  const r = await executeWithin(h.url, sid, code, { key: API_KEY, timeout_s: 1, withinMs: 20000 })
  t.ok(proxy.held() > 0, 'the kill was sent and hung')
  t.equal(r.done?.data.status, 'timeout', 'the execution ends with its done')
  t.ok(r.ms < 1000 + GRACE_MS + 4 * DOCKER_TIMEOUT_MS + 3000, `within ${r.ms.toFixed(0)} ms`)
  const err = r.events.find((e) => e.event === 'error')
  t.match(err?.data.evalue, /could not be killed/, 'an error event says the sandbox could not be killed')
  t.ok(await waitFor(async () => (await api(h.url, 'GET', `/v1/sessions/${sid}`)).status === 404, 15000), 'the reaper collected the session')
  t.ok(await waitFor(async () => !(await containersOf(h.deployment)).some((c) => c.Labels['replcast.session'] === sid), 30_000), 'its container is removed')
  const n = await api(h.url, 'POST', `/v1/sessions/${neighbour}/executions`, { code: 'print(1)' })
  t.equal(stdoutText(n.body.events), '1\n', 'another session of the tenant is unaffected')
})
