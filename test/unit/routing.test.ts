// Routing a session's request to its holder (src/cluster/routing.ts) when the holder dies with the
// request in hand: a POST it may have acted on is never sent again (the client sees a cut, as if it
// had been connected to the holder), while a GET goes on to whoever holds the session next.
import t, { type Test } from 'tap'
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import pino from 'pino'
import { Forwarder } from '../../src/cluster/forward.js'
import { route, type RoutingDeps } from '../../src/cluster/routing.js'
import type { InstanceDirectory } from '../../src/cluster/directory.js'
import type { Tunnels } from '../../src/cluster/upgrade-hop.js'

async function listen(t: Test, handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
  const server: Server = createServer(handler)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => {
    server.closeAllConnections()
    server.close()
  })
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

/**
 * A holder that reads each request whole, counts it, then dies with it (its connection cut, no
 * answer); and a front instance routing to it until the directory forgets it, then taking the
 * session over itself ('local', answered 200 "here").
 */
async function dyingHolder(t: Test) {
  const got: string[] = []
  const holderUrl = await listen(t, (req) => {
    req.resume()
    req.on('end', () => {
      got.push(`${req.method} ${req.url}`)
      req.socket.destroy()
    })
  })
  let forgotten = false
  const takenOver: string[] = []
  const forwarder = new Forwarder()
  t.teardown(() => forwarder.close())
  const deps: RoutingDeps = {
    instanceId: 'front',
    leases: { leaseHolder: async () => (forgotten ? null : 'holder') },
    directory: {
      lookup: async () => (forgotten ? null : holderUrl),
      forget: () => void (forgotten = true),
    } as unknown as InstanceDirectory,
    forwarder,
    tunnels: {} as Tunnels,
    sessions: {
      holds: () => false,
      takeOver: async (sid) => {
        takenOver.push(sid)
        return 'attached'
      },
    },
    log: pino({ level: 'silent' }),
    sign: () => 'signed',
    holders: new Map(),
  }
  const outcomes: string[] = []
  const frontUrl = await listen(t, (req, res) => {
    let answered = false
    void route(deps, { sid: 's1', req, res, internal: false, onAnswer: () => (answered = true) }).then(
      (where) => {
        outcomes.push(where)
        if (where === 'local' && !answered) res.end('here')
      },
      (err: Error) => {
        outcomes.push(`error ${err.message}`)
        res.statusCode = 503
        res.end()
      },
    )
  })
  return { frontUrl, got, takenOver, outcomes }
}

function send(url: string, method: string, body?: string): Promise<{ status: number; body: string } | { cut: string }> {
  return new Promise((resolve) => {
    const req = request(url, { method, headers: body ? { 'content-type': 'application/json' } : {} }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (s: string) => (text += s))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }))
    })
    req.on('error', (err) => resolve({ cut: err.message }))
    req.end(body)
  })
}

t.test('a POST the dying holder had in hand is cut, never sent again nor run here', async (t) => {
  const h = await dyingHolder(t)
  const answer = await send(`${h.frontUrl}/v1/sessions/s1/executions`, 'POST', '{"code":"n += 1"}')
  t.ok('cut' in answer, 'the client sees its connection cut', { answer })
  t.same(h.got, ['POST /v1/sessions/s1/executions'], 'the holder got it once')
  t.same(h.takenOver, [], 'the front did not take the session over to run it again')
  t.same(h.outcomes, ['forwarded'], 'the route ended with the cut')
})

t.test('a GET the dying holder had in hand goes to the next holder', async (t) => {
  const h = await dyingHolder(t)
  const answer = await send(`${h.frontUrl}/v1/sessions/s1/executions/e1`, 'GET')
  t.same(answer, { status: 200, body: 'here' }, 'answered by the instance that took the session over')
  t.same(h.got, ['GET /v1/sessions/s1/executions/e1'], 'the dead holder got it once')
  t.same(h.takenOver, ['s1'], 'the front took the session over')
})
