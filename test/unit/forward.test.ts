// The hop to a session's holder (src/cluster/forward.ts) between two in-process HTTP servers: the
// holder's answer reaches the client whole and in order, a head whose body waits still reaches it at
// once, and a holder that dies mid-answer leaves the client with a cut answer, never a
// complete-looking one; a closing holder's refusal never reaches the client; only the path travels,
// signed, without the headers Connection names.
import t, { type Test } from 'tap'
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { connect, type AddressInfo } from 'node:net'
import { Forwarder, HopBody, type HopOutcome } from '../../src/cluster/forward.js'
import { HopAuth } from '../../src/cluster/hop-auth.js'

const hops = new HopAuth({ configured: 'internal-key-for-the-test', redis: null as never, key: '', rotateMs: 0 })
const sign = (method: string, path: string) => hops.sign(method, path)

async function listen(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ url: string; server: Server }> {
  const server = createServer(handler)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server }
}

/** A front instance that passes every request to `holderUrl`; `outcomes` gets each hop's outcome. */
async function front(t: Test, holderUrl: string) {
  const forwarder = new Forwarder()
  const outcomes: HopOutcome[] = []
  const f = await listen((req, res) => {
    void forwarder.forward(req, res, holderUrl, sign, new HopBody(req, 0), () => undefined).then((o) => outcomes.push(o))
  })
  t.teardown(() => {
    forwarder.close()
    f.server.closeAllConnections()
    f.server.close()
  })
  return { url: f.url, outcomes }
}

async function holder(t: Test, handler: (req: IncomingMessage, res: ServerResponse) => void) {
  const h = await listen(handler)
  t.teardown(() => {
    h.server.closeAllConnections()
    h.server.close()
  })
  return h.url
}

/** GET through the front; resolves with the response once its head arrived. */
function get(url: string): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => request(url, resolve).on('error', reject).end())
}

function readAll(res: IncomingMessage): Promise<{ body: string; complete: boolean }> {
  return new Promise((resolve) => {
    let body = ''
    res.setEncoding('utf8')
    res.on('data', (s: string) => (body += s))
    res.on('end', () => resolve({ body, complete: res.complete }))
    res.on('error', () => resolve({ body, complete: false }))
    res.on('close', () => resolve({ body, complete: res.complete }))
  })
}

t.test('the answer comes back whole: status, its own headers, every chunk in order', async (t) => {
  const events = Array.from({ length: 50 }, (_, i) => `id: ${i}\nevent: stdout\ndata: {"text":"${i}"}\n\n`)
  const url = await holder(t, (req, res) => {
    t.ok(hops.verify(req.headers['x-replcast-forwarded'], req.method!, req.url!), 'the hop carries a signature for its method and path')
    res.writeHead(200, { 'content-type': 'text/event-stream', 'x-own': 'kept' })
    // Some chunks in one write, the rest one by one.
    res.write(events.slice(0, 10).join(''))
    for (const e of events.slice(10)) res.write(e)
    res.end()
  })
  const f = await front(t, url)
  const res = await get(`${f.url}/v1/sessions/s/executions/e/events`)
  t.equal(res.statusCode, 200)
  t.equal(res.headers['x-own'], 'kept')
  t.equal(res.headers['x-replcast-forwarded'], undefined, 'the internal header does not reach the client')
  const { body, complete } = await readAll(res)
  t.ok(complete, 'the answer ended normally')
  t.equal(body, events.join(''), 'every event, once, in order')
  t.same(f.outcomes, [{ kind: 'answered' }])
})

t.test('a head whose body waits reaches the client at once', async (t) => {
  let sendBody: () => void = () => undefined
  const url = await holder(t, (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    res.flushHeaders()
    sendBody = () => res.end('data: late\n\n')
  })
  const f = await front(t, url)
  // The body is sent only once the client has the head: a relay that kept the head for the body would never answer.
  const res = await get(`${f.url}/events`)
  t.equal(res.statusCode, 200, 'the head came before any of the body')
  sendBody()
  t.equal((await readAll(res)).body, 'data: late\n\n')
})

t.test('a holder that dies in the middle of an answer leaves the client with a cut answer', async (t) => {
  const url = await holder(t, (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    res.write('data: first\n\n', () => res.socket?.destroy())
  })
  const f = await front(t, url)
  const res = await get(`${f.url}/events`)
  const { body, complete } = await readAll(res)
  t.equal(body, 'data: first\n\n', 'what came before the cut came through')
  t.notOk(complete, 'the client sees that the answer was cut')
})

t.test("a closing holder's 503 (problem+json, marked refused) is a refusal: the client never sees it, the request is asked again", async (t) => {
  const url = await holder(t, (_req, res) => {
    res.writeHead(503, { 'content-type': 'application/problem+json', 'retry-after': '1', 'x-replcast-refused': '1', connection: 'close' })
    res.end(JSON.stringify({ code: 'unavailable', status: 503 }))
  })
  const forwarder = new Forwarder()
  const outcomes: HopOutcome[] = []
  // A front that answers by itself when the hop was refused (routing.ts asks the new holder then).
  const f = await listen((req, res) => {
    void forwarder
      .forward(req, res, url, sign, new HopBody(req, 0), () => undefined)
      .then((o) => {
        outcomes.push(o)
        if (!res.headersSent) res.end('asked again')
      })
  })
  t.teardown(() => {
    forwarder.close()
    f.server.closeAllConnections()
    f.server.close()
  })
  const res = await get(`${f.url}/v1/sessions/s/executions`)
  t.equal(res.statusCode, 200)
  t.equal((await readAll(res)).body, 'asked again', "the closing instance's answer did not reach the client")
  t.same(outcomes, [{ kind: 'refused' }])
})

/** Sends `text` as it is on a new connection to `url`; resolves with what came back before the close. */
function raw(url: string, text: string): Promise<string> {
  const u = new URL(url)
  return new Promise((resolve, reject) => {
    const s = connect(Number(u.port), u.hostname, () => s.end(text))
    let got = ''
    s.setEncoding('utf8')
    s.on('data', (d: string) => (got += d))
    s.on('close', () => resolve(got))
    s.on('error', reject)
  })
}

t.test('a request target in absolute form is never followed: its host sees no connection', async (t) => {
  let trapped = 0
  const trap = await listen((_req, res) => res.end())
  trap.server.on('connection', () => trapped++)
  t.teardown(() => trap.server.close())
  let held = 0
  const url = await holder(t, (_req, res) => {
    held++
    res.end()
  })
  const f = await front(t, url)
  await raw(f.url, `GET ${trap.url}/v1/sessions/s/files HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\nConnection: close\r\n\r\n`)
  t.equal(trapped, 0, 'the host named in the target was not contacted')
  t.equal(held, 0, 'nor was the holder')
  t.equal(f.outcomes[0]?.kind, 'unreachable', 'the hop refused it')
})

t.test('headers named in Connection stay on their hop, both ways', async (t) => {
  let seen: IncomingMessage['headers'] = {}
  const url = await holder(t, (req, res) => {
    seen = req.headers
    res.writeHead(200, { connection: 'x-answer-private', 'x-answer-private': '1', 'x-answer-public': '1' })
    res.end('ok')
  })
  const f = await front(t, url)
  const res = await new Promise<IncomingMessage>((resolve, reject) =>
    request(`${f.url}/x`, { headers: { connection: 'keep-alive, X-Private', 'x-private': 'secret', 'x-public': 'kept' } }, resolve)
      .on('error', reject)
      .end(),
  )
  await readAll(res)
  t.equal(seen['x-private'], undefined, 'a request header named in Connection did not pass')
  t.equal(seen['x-public'], 'kept')
  t.equal(res.headers['x-answer-private'], undefined, 'an answer header named in Connection did not pass')
  t.equal(res.headers['x-answer-public'], '1')
})

t.test('a hop signature is good for its own method and path, for a short time, under a key of the deployment', async (t) => {
  let now = 1_800_000_000_000
  const a = new HopAuth({ configured: 'k1', redis: null as never, key: '', rotateMs: 0, now: () => now })
  const v = a.sign('GET', '/v1/sessions/s/files?path=a')
  t.ok(a.verify(v, 'GET', '/v1/sessions/s/files?path=a'))
  t.notOk(a.verify(v, 'DELETE', '/v1/sessions/s/files?path=a'), 'another method')
  t.notOk(a.verify(v, 'GET', '/v1/sessions/s/files?path=b'), 'another path')
  t.notOk(a.verify(v.slice(0, -1) + (v.endsWith('A') ? 'B' : 'A'), 'GET', '/v1/sessions/s/files?path=a'), 'a changed signature')
  t.notOk(a.verify('internal-secret', 'GET', '/'), 'a static value')
  t.notOk(a.verify(undefined, 'GET', '/'), 'no header')
  now += 31_000
  t.notOk(a.verify(v, 'GET', '/v1/sessions/s/files?path=a'), 'a signature past its validity')
  const other = new HopAuth({ configured: 'k2', redis: null as never, key: '', rotateMs: 0, now: () => now })
  t.notOk(a.verify(other.sign('GET', '/'), 'GET', '/'), "another deployment's key")
  const rotated = new HopAuth({ configured: 'k2,k1', redis: null as never, key: '', rotateMs: 0, now: () => now })
  t.ok(rotated.verify(a.sign('GET', '/'), 'GET', '/'), 'a key put second still verifies (rotation by configuration)')
  t.ok(a.verify(a.sign('GET', '/'), 'GET', '/'))
})
