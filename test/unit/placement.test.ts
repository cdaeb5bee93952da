// Placing a create on another engine's instance (src/http/placement.ts): when that instance stops
// with the create in hand, it may have made the sandbox, so the create is neither made here nor
// answered "retry" (a retry would make a second session): the client sees a cut. An instance that
// never got the request leaves the create to this one.
import t, { type Test } from 'tap'
import Fastify from 'fastify'
import { createServer, request, type IncomingMessage, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Forwarder, HopBody } from '../../src/cluster/forward.js'
import { installPlacement } from '../../src/http/placement.js'

async function listen(t: Test, server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => {
    server.closeAllConnections()
    server.close()
  })
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

/** This instance, placing every create on instance "other" at `otherUrl`; `made` counts the creates it made itself. */
async function front(t: Test, otherUrl: string) {
  const app = Fastify()
  const forwarder = new Forwarder()
  t.teardown(async () => {
    forwarder.close()
    await app.close()
  })
  const cluster = {
    isInternal: () => false,
    lookup: async () => otherUrl,
    forward: (req: IncomingMessage, res: Parameters<Forwarder['forward']>[1], url: string, onAnswer: () => void) =>
      forwarder.forward(req, res, url, () => 'signed', new HopBody(req, 0), onAnswer),
  }
  installPlacement(app, cluster, { place: async () => ({ engine: 'engine-2', instances: ['other'] }) })
  let made = 0
  app.post('/v1/sessions', { config: { placed: true } }, async (_req, reply) => {
    made++
    return reply.code(201).send({ id: 'ses_here' })
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  return { url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`, made: () => made }
}

function post(url: string): Promise<{ status: number; body: string } | { cut: string }> {
  return new Promise((resolve) => {
    const req = request(`${url}/v1/sessions`, { method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (c: string) => (body += c))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }))
      res.on('error', (err) => resolve({ cut: err.message }))
    })
    req.on('error', (err) => resolve({ cut: err.message }))
    req.end('{"idle_timeout_s": 60}')
  })
}

t.test('the chosen instance stops with the create in hand: the client sees a cut, and nothing is made here', async (t) => {
  const got: string[] = []
  const other = createServer((req) => {
    let body = ''
    req.on('data', (c: Buffer) => (body += c.toString()))
    req.on('end', () => {
      got.push(body)
      req.socket.destroy()
    })
  })
  const app = await front(t, await listen(t, other))
  const answer = await post(app.url)
  t.ok('cut' in answer, `no answer, a cut (${JSON.stringify(answer)})`)
  t.same(got, ['{"idle_timeout_s": 60}'], 'the other instance had the whole create')
  t.equal(app.made(), 0, 'and it was not made here as well')
})

t.test('an instance that cannot be reached never got the create: this instance makes it', async (t) => {
  const closed = createServer()
  const url = await listen(t, closed)
  closed.closeAllConnections()
  await new Promise<void>((resolve) => closed.close(() => resolve()))
  const app = await front(t, url)
  t.same(await post(app.url), { status: 201, body: '{"id":"ses_here"}' })
  t.equal(app.made(), 1)
})
