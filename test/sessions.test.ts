// Session lifecycle over the API: create, read, list, delete; tenants are isolated; bad input is a clear 4xx.
import t from 'tap'
import Docker from 'dockerode'
import { request } from 'node:http'
import { API_KEY, OTHER_KEY, containersOf, startApp } from './helpers/app.js'
import { api, createSession, executeSse, stdoutOf } from './helpers/client.js'

t.test('sessions', async (t) => {
  const h = await startApp(t, { TENANT_MAX_SESSIONS: '3', MAX_MEMORY_MB: '1024' })

  t.test('a POST without a body creates a session with the defaults', async (t) => {
    const r = await fetch(`${h.url}/v1/sessions`, { method: 'POST', headers: { authorization: `Bearer ${API_KEY}` } })
    t.equal(r.status, 201)
    const s = await r.json()
    t.match(s, {
      status: 'ready',
      runtime: h.config.SANDBOX_RUNTIME,
      idle_timeout_s: h.config.IDLE_TIMEOUT_S,
      limits: { memory_mb: h.config.SANDBOX_MEMORY_MB },
    })
    await api(h.url, 'DELETE', `/v1/sessions/${s.id}`)
  })

  t.test('create, get, list and delete; the container is gone afterwards', async (t) => {
    const r = await api(h.url, 'POST', '/v1/sessions', {
      idle_timeout_s: 120,
      limits: { memory_mb: 256, cpus: 0.5 },
      metadata: { purpose: 'test' },
      env: { GREETING: 'hello' },
    })
    t.equal(r.status, 201)
    t.equal(r.headers.get('location'), `/v1/sessions/${r.body.id}`)
    t.match(r.body, { status: 'ready', runtime: 'runc', idle_timeout_s: 120, limits: { memory_mb: 256, cpus: 0.5, pids: 128 }, metadata: { purpose: 'test' } })
    const sid = r.body.id
    t.ok(Date.parse(r.body.expires_at) - Date.parse(r.body.last_active_at) === 120_000, 'expires_at = last_active_at + idle timeout')

    const env = await executeSse(h.url, sid, 'import os\nprint(os.environ["GREETING"])')
    t.equal(stdoutOf(env.events), 'hello\n', 'env reaches the REPL')

    const got = await api(h.url, 'GET', `/v1/sessions/${sid}`)
    t.equal(got.body.id, sid)
    const list = await api(h.url, 'GET', '/v1/sessions')
    t.ok(list.body.sessions.some((s: any) => s.id === sid))

    const containers = await containersOf(h.deployment)
    const mine = containers.find((c) => c.Labels['replcast.session'] === sid)!
    t.ok(mine, 'container labelled with the session')
    const info = await new Docker().getContainer(mine.Id).inspect()
    t.equal(info.HostConfig.NetworkMode, 'none')
    t.equal(info.HostConfig.ReadonlyRootfs, true)
    t.same(info.HostConfig.CapDrop, ['ALL'])
    t.same(info.HostConfig.SecurityOpt, ['no-new-privileges'])
    t.equal(info.HostConfig.Memory, 256 * 1024 * 1024)
    t.equal(info.HostConfig.MemorySwap, 256 * 1024 * 1024)
    t.equal(info.HostConfig.NanoCpus, 0.5e9)
    t.equal(info.HostConfig.PidsLimit, 128)
    t.equal(info.HostConfig.Init, true)
    t.equal(info.Config.User, '1000:1000')
    t.notOk(JSON.stringify(info.HostConfig.Binds ?? []).includes('docker.sock'), 'no Docker socket')

    const del = await api(h.url, 'DELETE', `/v1/sessions/${sid}`)
    t.equal(del.status, 204)
    t.equal((await api(h.url, 'GET', `/v1/sessions/${sid}`)).status, 404)
    t.notOk(
      (await containersOf(h.deployment)).some((c) => c.Id === mine.Id),
      'container removed',
    )
    t.equal((await api(h.url, 'DELETE', `/v1/sessions/${sid}`)).status, 404, 'deleting twice is a 404')
  })

  t.test('another tenant sees nothing: every route answers 404 as for a missing session', async (t) => {
    const sid = await createSession(h.url)
    const ex = await api(h.url, 'POST', `/v1/sessions/${sid}/executions`, { code: 'secret = 1' })
    const eid = ex.body.id
    for (const [method, path] of [
      ['GET', `/v1/sessions/${sid}`],
      ['DELETE', `/v1/sessions/${sid}`],
      ['POST', `/v1/sessions/${sid}/interrupt`],
      ['POST', `/v1/sessions/${sid}/restart`],
      ['GET', `/v1/sessions/${sid}/executions/${eid}`],
    ] as const) {
      const r = await api(h.url, method, path, undefined, { key: OTHER_KEY })
      t.equal(r.status, 404, `${method} ${path}`)
      t.equal(r.body.code, 'session_not_found')
    }
    const post = await api(h.url, 'POST', `/v1/sessions/${sid}/executions`, { code: 'print(secret)' }, { key: OTHER_KEY })
    t.equal(post.status, 404)
    const missing = await api(h.url, 'GET', '/v1/sessions/ses_AAAAAAAAAAAAAAAAAAAA')
    t.same(Object.keys(missing.body).sort(), Object.keys(post.body).sort(), 'same problem shape as a missing session')
    const list = await api(h.url, 'GET', '/v1/sessions', undefined, { key: OTHER_KEY })
    t.notOk(list.body.sessions.some((s: any) => s.id === sid))
    await api(h.url, 'DELETE', `/v1/sessions/${sid}`)
  })

  t.test('keys: missing or wrong is 401 problem+json', async (t) => {
    const none = await fetch(`${h.url}/v1/sessions`)
    t.equal(none.status, 401)
    t.equal(none.headers.get('content-type'), 'application/problem+json; charset=utf-8')
    t.equal((await none.json()).code, 'unauthorized')
    const wrong = await api(h.url, 'GET', '/v1/sessions', undefined, { key: 'not-a-real-key-123' })
    t.equal(wrong.status, 401)
    // A target in absolute form is refused before anything reads it (http/request-target.ts).
    t.equal(await rawRequest(h.url, 'GET', 'http://x/v1/sessions'), 400, 'GET http://x/v1/sessions → 400')
    // The same routes reached through other spellings of the URL are still authenticated.
    for (const [method, target] of [
      ['GET', '/%761/sessions'],
      ['POST', '/%761/sessions'],
      ['GET', '/v1//sessions'],
      ['GET', '/v1/sessions/../sessions'],
    ]) {
      const status = await rawRequest(h.url, method!, target!)
      t.ok(status === 401 || status === 404, `${method} ${target} → ${status} (never served without a key)`)
    }
  })

  t.test('bad input gets a clear 4xx with a stable code', async (t) => {
    const cases: Array<[unknown, number, string]> = [
      ['{not json', 400, 'bad_request'],
      [{ idle_timeout_s: 'soon' }, 400, 'validation_failed'],
      [{ unknown_field: 1 }, 400, 'validation_failed'],
      [{ runtime: 'kata' }, 400, 'validation_failed'],
      [{ limits: { memory_mb: 999999 } }, 400, 'limit_exceeded'],
      [{ limits: { memory_mb: 1 } }, 400, 'validation_failed'],
      ['{"metadata": {"a": "\\u0000"}}', 400, 'bad_request'],
    ]
    for (const [body, status, code] of cases) {
      const r = await api(h.url, 'POST', '/v1/sessions', body)
      t.equal(r.status, status, `${JSON.stringify(body)} → ${status}`)
      t.equal(r.body.code, code)
      t.match(r.body, { type: `https://replcast.dev/problems/${code}`, title: String, status, detail: String })
    }
    const plain = await api(h.url, 'POST', '/v1/sessions', 'hello', { headers: { 'content-type': 'text/plain' } })
    t.equal(plain.status, 415)
    t.equal(plain.body.code, 'unsupported_media_type')
    const badUtf8 = await fetch(`${h.url}/v1/sessions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
      body: Buffer.from([0x7b, 0xff, 0x7d]),
    })
    t.equal(badUtf8.status, 400)
    t.equal((await badUtf8.json()).code, 'bad_request')
    const tooBig = await api(h.url, 'POST', '/v1/sessions/ses_AAAAAAAAAAAAAAAAAAAA/executions', { code: 'x'.repeat(11 * 1024 * 1024) })
    t.equal(tooBig.status, 413)
    t.equal(tooBig.body.code, 'payload_too_large')
    const limit = await api(h.url, 'POST', '/v1/sessions', { limits: { memory_mb: 2048 } })
    t.equal(limit.body.limit, 'limits.memory_mb', 'the problem names the limit')
    const route = await api(h.url, 'GET', '/v1/nothing-here')
    t.equal(route.status, 404)
    t.equal(route.body.code, 'not_found')
  })

  t.test('a tenant cannot hold more sessions than its quota', async (t) => {
    // Five at once against a quota of three: the check and the creation are one atomic step.
    const all = await Promise.all(Array.from({ length: 5 }, () => api(h.url, 'POST', '/v1/sessions', {})))
    t.same(all.map((r) => r.status).sort(), [201, 201, 201, 429, 429], 'exactly the quota is created, even concurrently')
    const ids = all.filter((r) => r.status === 201).map((r) => r.body.id)
    t.equal((await containersOf(h.deployment)).length, 3, 'and only that many containers')
    const over = await api(h.url, 'POST', '/v1/sessions', {})
    t.equal(over.status, 429)
    t.equal(over.body.code, 'quota_exceeded')
    t.ok(over.headers.get('retry-after'), 'Retry-After is set')
    const other = await api(h.url, 'POST', '/v1/sessions', {}, { key: OTHER_KEY })
    t.equal(other.status, 201, 'another tenant is not affected')
    for (const id of ids) await api(h.url, 'DELETE', `/v1/sessions/${id}`)
    await api(h.url, 'DELETE', `/v1/sessions/${other.body.id}`, undefined, { key: OTHER_KEY })
  })

  t.test('operations endpoints', async (t) => {
    t.equal((await api(h.url, 'GET', '/healthz')).body.status, 'ok')
    const ready = await api(h.url, 'GET', '/readyz')
    t.same(ready.body, { status: 'ok', checks: { redis: 'ok', docker: 'ok' } })
    const metrics = await api(h.url, 'GET', '/metrics')
    t.match(metrics.body, /replcast_executions_total\{status="ok"\}/)
    t.match(metrics.body, /replcast_session_create_seconds_bucket/)
  })
})

/** A request with an exact request-target (absolute-form, percent-encoded), as fetch would normalise it. */
function rawRequest(base: string, method: string, target: string): Promise<number> {
  const { hostname, port } = new URL(base)
  return new Promise((resolve, reject) => {
    const req = request({ host: hostname, port, method, path: target }, (res) => {
      res.resume()
      resolve(res.statusCode ?? 0)
    })
    req.on('error', reject)
    req.end()
  })
}
