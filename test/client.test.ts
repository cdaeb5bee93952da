// The TypeScript client (clients/typescript) against a live server: an execution's events survive
// connections cut in the middle (resumed with Last-Event-ID: nothing lost, nothing repeated), and
// failures arrive as typed errors carrying the problem code.
import t from 'tap'
import { createServer, connect, type Socket } from 'node:net'
import { ERRORS } from '../src/errors.js'
import {
  AuthError,
  ConflictError,
  ConnectionError,
  ERROR_CODES,
  InvalidRequestError,
  NotFoundError,
  ReplcastClient,
  ReplcastError,
  type ExecutionEvent,
} from '../clients/typescript/src/index.ts'
import { API_KEY, startApp } from './helpers/app.js'
import { stdoutText } from './helpers/client.js'

/** A TCP proxy in front of the server whose open connections the test can cut at will. */
async function startProxy(target: string): Promise<{ url: string; connections: () => number; cut: () => void; close: () => Promise<void> }> {
  const { hostname, port } = new URL(target)
  const open = new Set<Socket>()
  let count = 0
  const server = createServer((down) => {
    count += 1
    const up = connect(Number(port), hostname)
    for (const s of [down, up]) {
      open.add(s)
      s.on('close', () => open.delete(s))
      s.on('error', () => undefined)
    }
    down.pipe(up).pipe(down)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const addr = server.address()
  return {
    url: `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`,
    connections: () => count,
    cut: () => {
      for (const s of open) s.destroy()
    },
    close: () =>
      new Promise((resolve) => {
        for (const s of open) s.destroy()
        server.close(() => resolve())
      }),
  }
}

/** Whether the event id (a Redis stream id, "ms-seq") `a` comes after `b`. */
function idAfter(a: string, b: string): boolean {
  const [am, as] = a.split('-').map(BigInt) as [bigint, bigint]
  const [bm, bs] = b.split('-').map(BigInt) as [bigint, bigint]
  return am > bm || (am === bm && as > bs)
}

const LINES = 20
const SLOW_LINES = `import time\nfor i in range(${LINES}):\n    print(f"line {i}", flush=True)\n    time.sleep(0.1)\n"end"`

t.test('the client', async (t) => {
  const h = await startApp(t)
  const proxy = await startProxy(h.url)
  t.teardown(proxy.close)
  const client = new ReplcastClient({ url: proxy.url, apiKey: API_KEY })
  const session = await client.createSession({ idle_timeout_s: 120 })

  t.test('an execution streamed through connections cut mid-way: every event once, in order', async (t) => {
    const stream = await client.stream(session.id, SLOW_LINES, { retryDelayMs: 20 })
    const events: ExecutionEvent[] = []
    const reconnectedAfter: string[] = []
    const cutAt = ['line 4\n', 'line 11\n']
    const before = proxy.connections()
    let printed = ''
    for await (const e of stream) {
      events.push(e)
      if (e.type === 'stdout') printed += e.text ?? ''
      // Later lines do not exist yet (the code sleeps between them), so each cut lands mid-execution.
      if (cutAt[0] && printed.includes(cutAt[0])) {
        cutAt.shift()
        reconnectedAfter.push(e.id)
        proxy.cut()
      }
    }
    const stdout = stdoutText(events)
    t.equal(stdout, Array.from({ length: LINES }, (_, i) => `line ${i}\n`).join(''), 'no line lost or repeated')
    t.equal(stream.reconnects, 2, 'it reconnected once per cut')
    t.ok(proxy.connections() - before >= 2, 'each time over a new connection')
    const ids = events.map((e) => e.id)
    t.ok(
      ids.every((id, i) => i === 0 || idAfter(id, ids[i - 1]!)),
      'ids strictly increase: no event twice',
    )
    t.match(events.at(-2), { type: 'result', data: { 'text/plain': "'end'" } })
    t.equal(events.at(-1)?.type, 'done')
    t.equal(stream.status, 'ok')
    t.equal(stream.lastEventId, ids.at(-1))

    // The same log read again from a point in the middle: exactly the events after it.
    const mid = reconnectedAfter[0]!
    const tail: ExecutionEvent[] = []
    for await (const e of client.events(session.id, stream.executionId, { lastEventId: mid })) tail.push(e)
    t.same(
      tail.map((e) => e.id),
      ids.slice(ids.indexOf(mid) + 1),
    )
    const nothing: ExecutionEvent[] = []
    for await (const e of client.events(session.id, stream.executionId, { lastEventId: ids.at(-1)! })) nothing.push(e)
    t.same(nothing, [], 'after the last event of an ended execution: nothing (204)')
  })

  t.test('execute waits and returns the whole execution', async (t) => {
    const ex = await client.execute(session.id, 'print("hi")')
    t.equal(ex.status, 'ok')
    t.match(ex.events, [{ type: 'status' }, { type: 'stdout', text: 'hi\n' }])
  })

  t.test('failures are typed errors with the problem code', async (t) => {
    const missing = await client.getSession('ses_AAAAAAAAAAAAAAAAAAAA').catch((e: unknown) => e)
    t.type(missing, NotFoundError)
    t.ok(missing instanceof ReplcastError && missing.is('session_not_found') && missing.status === 404)
    t.type(await new ReplcastClient({ url: h.url, apiKey: 'wrong' }).listSessions().catch((e: unknown) => e), AuthError)
    const idle = await client.interrupt(session.id).catch((e: unknown) => e)
    t.type(idle, ConflictError)
    t.equal((idle as ReplcastError).code, 'nothing_running')
    const bad = await client.createSession({ limits: { memory_mb: 1 } }).catch((e: unknown) => e)
    t.type(bad, InvalidRequestError)
    t.equal((bad as ReplcastError).code, 'validation_failed')
    t.match((bad as ReplcastError).problem, { status: 400, code: 'validation_failed' })
    const down = await new ReplcastClient({ url: 'http://127.0.0.1:1', apiKey: API_KEY }).listSessions().catch((e: unknown) => e)
    t.type(down, ConnectionError)
    t.equal((down as ReplcastError).code, 'network')
  })

  t.test('the client knows every problem code the server has (add new ones to clients/typescript/src/errors.ts)', async (t) => {
    t.same([...ERROR_CODES].sort(), Object.keys(ERRORS).sort())
  })

  await t.test('clean-up', async () => client.deleteSession(session.id))
})
