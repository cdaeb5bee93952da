// The hop to a session's holder (src/cluster/forward.ts) between two in-process HTTP servers: the
// holder's answer reaches the client whole and in order, a head whose body waits still reaches it at
// once, and a holder that dies mid-answer leaves the client with a cut answer, never a
// complete-looking one.
import t, { type Test } from 'tap'
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Forwarder, HopBody, type HopOutcome } from '../../src/cluster/forward.js'

const SECRET = 'internal-secret-for-the-test'

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
    void forwarder.forward(req, res, holderUrl, SECRET, new HopBody(req, 0), () => undefined).then((o) => outcomes.push(o))
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
    t.equal(req.headers['x-replcast-forwarded'], SECRET, 'the hop carries the internal secret')
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
