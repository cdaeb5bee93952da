// The hop between instances carries nothing a tenant can steer or keep: a request target in absolute
// form is refused at the edge (the host it names sees no connection, whichever instance gets it and
// whatever the route), a forged or replayed hop header makes a request no more internal than any
// other, and the keys that sign hops rotate in Redis without refusing a hop under way.
import t from 'tap'
import { createServer } from 'node:http'
import { connect, type AddressInfo } from 'node:net'
import { Redis } from 'ioredis'
import { API_KEY, testEnv } from './helpers/app.js'
import { api, createSession } from './helpers/client.js'
import { startReplicas } from './helpers/replicas.js'
import { HopAuth, REFRESH_MS } from '../src/cluster/hop-auth.js'

/** Sends `text` as it is on a new connection; resolves with the status line's code and the body. */
function raw(base: string, text: string): Promise<{ status: number; contentType: string; body: string }> {
  const u = new URL(base)
  return new Promise((resolve, reject) => {
    const s = connect(Number(u.port), u.hostname, () => s.end(text))
    let got = ''
    s.setEncoding('latin1')
    s.on('data', (d: string) => (got += d))
    s.on('close', () => {
      const [head = '', body = ''] = got.split('\r\n\r\n')
      resolve({
        status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0),
        contentType: /\r\ncontent-type: ([^\r]*)/i.exec(head)?.[1] ?? '',
        body,
      })
    })
    s.on('error', reject)
  })
}

t.test('a request target in absolute form is refused, and the host it names sees no connection', async (t) => {
  const r = await startReplicas(t, 2)
  const [a, b] = r.servers.map((s) => s.url) as [string, string]
  const sid = await createSession(a)
  t.equal(await r.holderOf(sid), 0)

  // The tenant's own listener: were a hop to follow the target, the request (key and hop header) would land here.
  let connections = 0
  const trap = createServer((_req, res) => res.end())
  trap.on('connection', () => connections++)
  await new Promise<void>((resolve) => trap.listen(0, '127.0.0.1', resolve))
  t.teardown(() => trap.close())
  const there = `http://127.0.0.1:${(trap.address() as AddressInfo).port}`

  const mcpBody = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'execute', arguments: { session_id: sid, code: '1' } } })
  const requests: Array<[string, string, string]> = [
    ['GET', `/v1/sessions/${sid}/files`, ''],
    ['POST', `/v1/sessions/${sid}/executions`, '{"code":"1"}'],
    ['POST', '/v1/sessions', '{}'],
    ['POST', '/mcp', mcpBody],
  ]
  for (const base of [b, a]) {
    for (const [method, path, body] of requests) {
      const head = body ? `Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: ${body.length}\r\n` : ''
      const res = await raw(
        base,
        `${method} ${there}${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${API_KEY}\r\n${head}Connection: close\r\n\r\n${body}`,
      )
      const who = `${method} ${path} to the ${base === b ? 'other instance' : 'holder'}`
      t.equal(res.status, 400, `${who}: 400`)
      t.match(res.contentType, /application\/problem\+json/)
      t.match(JSON.parse(res.body), { code: 'bad_request', detail: /origin-form/ })
    }
  }
  t.equal(connections, 0, 'the listener named in the targets was never contacted')
  const files = await api(b, 'GET', `/v1/sessions/${sid}/files`)
  t.equal(files.status, 200, 'the same request in origin form is served through the other instance')
})

t.test('a hop header that is not a fresh signature for this request is not internal', async (t) => {
  const r = await startReplicas(t, 2)
  const [a, b] = r.servers.map((s) => s.url) as [string, string]
  const sid = await createSession(a)
  const path = `/v1/sessions/${sid}/files`
  // An internal request to an instance that does not hold the session is refused (the sender asks the
  // holder); any other is passed on to the holder and answered. So B's answer tells what it took the header for.
  const keys = await r.redis.lrange(`${r.prefix}internal-keys`, 0, -1)
  t.equal(keys.length, 1, 'the deployment keeps its hop keys in Redis')
  const secret = keys[0]!.slice(keys[0]!.indexOf(':') + 1)
  const signer = new HopAuth({ configured: secret, redis: r.redis, key: '', rotateMs: 0 })
  const forged = new HopAuth({ configured: 'not-the-key', redis: r.redis, key: '', rotateMs: 0 })
  const old = new HopAuth({ configured: secret, redis: r.redis, key: '', rotateMs: 0, now: () => Date.now() - 60_000 })
  const cases: Array<[string, string, number]> = [
    ['a static value (the old kind of header)', secret, 200],
    ['a signature under another key', forged.sign('GET', path), 200],
    ['a signature for another path', signer.sign('GET', `/v1/sessions/${sid}`), 200],
    ['a signature for another method', signer.sign('DELETE', path), 200],
    ['a signature a minute old', old.sign('GET', path), 200],
    ['a fresh signature for this request', signer.sign('GET', path), 503],
  ]
  for (const [what, header, status] of cases) {
    const res = await api(b, 'GET', path, undefined, { headers: { 'x-replcast-forwarded': header } })
    t.equal(res.status, status, `${what}: ${status === 200 ? 'passed on and answered, as any request' : 'taken as a hop, refused'}`)
  }
})

t.test('hop keys rotate in Redis: a new key signs only once every instance has read it, and the last ones still verify', async (t) => {
  const redis = new Redis(testEnv().REDIS_URL!)
  const key = `replcast-test-hop-keys-${process.pid}`
  t.teardown(async () => {
    await redis.del(key)
    redis.disconnect()
  })
  let now = 1_800_000_000_000
  const opts = { configured: '', redis, key, rotateMs: 60_000, now: () => now }
  const one = new HopAuth(opts)
  const two = new HopAuth(opts)
  await one.refresh()
  await two.refresh()
  t.equal(await redis.llen(key), 1, 'the first instance made one key; the second read it')
  const before = one.sign('GET', '/x')
  t.ok(two.verify(before, 'GET', '/x'), 'both instances share it')

  now += 60_000
  await one.refresh() // due: one adds a new key
  t.equal(await redis.llen(key), 2)
  t.ok(two.verify(one.sign('GET', '/x'), 'GET', '/x'), 'a hop signed right after the rotation verifies at an instance that has not read the new key yet')
  now += 3 * REFRESH_MS
  await two.refresh()
  const after = one.sign('GET', '/x')
  t.ok(two.verify(after, 'GET', '/x'), 'once adopted, the new key signs')
  t.notOk(
    new HopAuth({ ...opts, configured: (await redis.lrange(key, 1, 1))[0]!.split(':')[1]! }).verify(after, 'GET', '/x'),
    'the new key, not the old one, signed it',
  )
  t.ok(two.verify(before, 'GET', '/x') === false, 'the first signature has expired meanwhile')

  for (let i = 0; i < 3; i++) {
    now += 60_000
    await one.refresh()
  }
  t.equal(await redis.llen(key), 3, 'three keys are kept: older ones are gone')
})
