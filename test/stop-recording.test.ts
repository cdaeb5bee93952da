// The API process is told to stop (SIGTERM) while an execution's start is on its way to Redis: it
// hands the session over before Redis answers. The execution is recorded as running, but the REPL
// never got it. The process that takes the session over sends it: it runs once, and its client
// gets every event once, never a `killed` for a session nobody deleted.
import t from 'tap'
import { API_KEY } from './helpers/app.js'
import { readSse, stdoutOf } from './helpers/client.js'
import { redisProxy } from './helpers/redis-proxy.js'
import { isolatedServer } from './helpers/server-process.js'
import { waitFor } from './helpers/wait.js'

t.test('an execution recorded while its instance stops is run once by the next one', async (t) => {
  const proxy = await redisProxy(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379')
  t.teardown(() => proxy.close())
  const h = await isolatedServer(t, 'stopping', { REDIS_URL: proxy.url })
  const auth = { authorization: `Bearer ${API_KEY}` }
  const { id: sid } = (await (
    await fetch(`${h.server.url}/v1/sessions`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: '{}' })
  ).json()) as { id: string }

  // Its record (the code is in it) is held on its way to Redis.
  const code = 'n = globals().get("n", 0) + 1\nprint("recorded-then-stopped", n)'
  proxy.holdWhen = [Buffer.from('recorded-then-stopped')]
  const posted = fetch(`${h.server.url}/v1/sessions/${sid}/executions`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({ code }),
  })
  await proxy.started
  const exited = new Promise((resolve) => h.server.child.once('exit', resolve))
  h.server.child.kill('SIGTERM')
  // The hand-over has let the session go here: it releases the session's lease, held after the record
  // (a renewal names the lease's term as well).
  const [lease, term] = [Buffer.from(`{${sid}}:lease\r\n`), Buffer.from(`{${sid}}:lease-term`)]
  const released = () =>
    proxy
      .held()
      .slice(1)
      .some((c) => c.includes(lease) && !c.includes(term))
  t.ok(await waitFor(released, 30_000), 'the stopping instance let the session go')
  proxy.pass()

  const res = await posted
  t.equal(res.status, 200, 'the execution was accepted: its stream began')
  const eid = res.headers.get('location')!.split('/').pop()!
  await res.body?.cancel().catch(() => undefined)
  await exited

  await h.respawn()
  const events = await readSse(
    await fetch(`${h.server.url}/v1/sessions/${sid}/executions/${eid}/events`, { headers: { ...auth, accept: 'text/event-stream' } }),
  )
  t.equal(stdoutOf(events), 'recorded-then-stopped 1\n', 'it ran')
  t.same(
    events.filter((e) => e.event === 'status').map((e) => e.data.state),
    ['running'],
    'running, once',
  )
  t.same(
    events.filter((e) => e.event === 'done').map((e) => e.data.status),
    ['ok'],
    'one done, ok',
  )
  t.equal(new Set(events.map((e) => e.id)).size, events.length, 'no event twice')

  const again = await fetch(`${h.server.url}/v1/sessions/${sid}/executions`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ code: 'print(n)' }),
  })
  const after = (await again.json()) as { events: Array<{ type: string; text?: string }> }
  t.same(
    after.events.filter((e) => e.type === 'stdout').map((e) => e.text),
    ['1\n'],
    'it ran once: the namespace counted it once',
  )
})
