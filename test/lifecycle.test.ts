// What survives an API restart: sessions are re-adopted, idle ones are still reaped,
// leftovers unknown to Redis are removed.
import t from 'tap'
import Docker from 'dockerode'
import { API_KEY, containersOf, startApp } from './helpers/app.js'
import { api, createSession, executeSse, readSse, stdoutOf, stdoutText } from './helpers/client.js'
import { waitFor } from './helpers/wait.js'
import { sandboxLabels } from '../src/sandbox/labels.js'

t.test('across API restarts', async (t) => {
  const h = await startApp(t, { REAPER_INTERVAL_MS: '200' })

  t.test('a restarted API re-adopts running sessions with their state', async (t) => {
    const sid = await createSession(h.url)
    await executeSse(h.url, sid, 'remembered = "across restarts"')
    await h.restart()
    const r = await executeSse(h.url, sid, 'print(remembered)')
    t.equal(stdoutOf(r.events), 'across restarts\n')
    await api(h.url, 'DELETE', `/v1/sessions/${sid}`)
  })

  t.test('an idle session is reaped even when the API that created it was restarted', async (t) => {
    const sid = await createSession(h.url, { idle_timeout_s: 2 })
    t.equal((await containersOf(h.deployment)).filter((c) => c.Labels['replcast.session'] === sid).length, 1)
    await h.stop()
    await h.start()
    const gone = await waitFor(async () => (await containersOf(h.deployment)).every((c) => c.Labels['replcast.session'] !== sid), 15000)
    t.ok(gone, 'container removed')
    t.equal((await api(h.url, 'GET', `/v1/sessions/${sid}`)).status, 404, 'session gone')
  })

  t.test('activity postpones reaping', async (t) => {
    const sid = await createSession(h.url, { idle_timeout_s: 2 })
    const deadline0 = Number(await h.redis.zscore(`${h.prefix}deadlines`, sid))
    await executeSse(h.url, sid, 'import time; time.sleep(1)')
    const deadline1 = Number(await h.redis.zscore(`${h.prefix}deadlines`, sid))
    t.ok(deadline1 > deadline0, 'the deadline moved forward')
    t.equal((await api(h.url, 'GET', `/v1/sessions/${sid}`)).body.status, 'ready', 'still there after more than its idle time since creation')
    t.ok(await waitFor(async () => (await api(h.url, 'GET', `/v1/sessions/${sid}`)).status === 404, 15000), 'reaped once idle')
  })

  t.test("two instances: any one serves any session's events; commands reach the one holding the session", async (t) => {
    const other = await startApp(t, { REPLCAST_KEY_PREFIX: h.prefix, REPLCAST_DEPLOYMENT: h.deployment, REAPER_INTERVAL_MS: '200' })
    const sid = await createSession(h.url)
    const res = await fetch(`${h.url}/v1/sessions/${sid}/executions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ code: 'import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.2)' }),
    })
    const eid = res.headers.get('location')!.split('/').pop()!
    const [direct, viaOther] = await Promise.all([
      readSse(res),
      fetch(`${other.url}/v1/sessions/${sid}/executions/${eid}/events`, { headers: { authorization: `Bearer ${API_KEY}`, accept: 'text/event-stream' } }).then(
        (r) => readSse(r),
      ),
    ])
    t.equal(stdoutOf(viaOther), '0\n1\n2\n', 'the other instance streams the events live from Redis')
    t.same(
      viaOther.map((e) => e.id),
      direct.map((e) => e.id),
      'the same events, same ids',
    )
    t.equal((await api(other.url, 'GET', `/v1/sessions/${sid}`)).body.status, 'ready', 'reads work anywhere')
    const elsewhere = await api(other.url, 'POST', `/v1/sessions/${sid}/executions`, { code: 'print(i)' })
    t.equal(elsewhere.status, 200, 'a command to an instance that does not hold the session is answered by the holder')
    t.equal(stdoutText(elsewhere.body.events), '2\n', 'in the same namespace')
    await api(h.url, 'DELETE', `/v1/sessions/${sid}`)
  })

  t.test('containers labelled for this deployment but unknown to Redis are removed at start', async (t) => {
    const docker = new Docker()
    const c = await docker.createContainer({
      Image: h.config.SANDBOX_IMAGE,
      Cmd: ['sleep', '300'],
      Labels: sandboxLabels(h.deployment, 'ses_orphanorphanorphan00', 'alpha', 'gone'),
      HostConfig: { NetworkMode: 'none' },
    })
    await c.start()
    await h.restart()
    const removed = await waitFor(async () => !(await containersOf(h.deployment)).some((x) => x.Id === c.id), 30_000)
    t.ok(removed, 'orphan removed')
  })
})
