// The API process dies in the instant between sending a waiting execution to the REPL and recording
// its start in Redis: the process that adopts the session finds it queued in Redis but under way in
// the sandbox, and resumes it. It runs once; its client gets every event once.
import t from 'tap'
import Docker from 'dockerode'
import { API_KEY, containersOf } from './helpers/app.js'
import { readSse, stdoutOf } from './helpers/client.js'
import { redisProxy } from './helpers/redis-proxy.js'
import { isolatedServer, killHard } from './helpers/server-process.js'

t.test('an execution the REPL got before its start was recorded runs once after the API process dies', async (t) => {
  const proxy = await redisProxy(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379')
  t.teardown(() => proxy.close())
  const h = await isolatedServer(t, 'queued', { REDIS_URL: proxy.url })
  const auth = { authorization: `Bearer ${API_KEY}` }
  const post = (path: string, body: object, accept = 'application/json') =>
    fetch(`${h.server.url}${path}`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json', accept }, body: JSON.stringify(body) })
  const { id: sid } = (await (await post('/v1/sessions', {})).json()) as { id: string }

  // The first runs while the second waits behind it.
  const first = await post(`/v1/sessions/${sid}/executions`, { code: 'import time\nn = 1\ntime.sleep(2)' }, 'text/event-stream')
  const second = await post(`/v1/sessions/${sid}/executions`, { code: 'n += 1\nprint("second", n, flush=True)' }, 'text/event-stream')
  const eid = second.headers.get('location')!.split('/').pop()!
  await second.body?.cancel()
  // The second's start, recorded as it is sent to the REPL, never reaches Redis.
  proxy.holdWhen = [Buffer.from(eid), Buffer.from('started_at')]
  await readSse(first)
  const timeout = new Promise<string>((resolve) => setTimeout(() => resolve('not within 30 s'), 30_000).unref())
  t.equal(await Promise.race([proxy.started.then(() => 'held'), timeout]), 'held', "the process sent the second's start to Redis, which did not get it")

  // The REPL ran it all the same: its frames are in the sandbox's log.
  const [container] = await containersOf(h.env.REPLCAST_DEPLOYMENT!)
  const ended = async () => {
    const logs = (await new Docker().getContainer(container!.Id).logs({ stdout: true, stderr: false })).toString('utf8')
    return logs.split('\n').some((line) => line.includes(eid) && line.includes('"done"'))
  }
  while (!(await ended())) await new Promise((r) => setTimeout(r, 50))

  await killHard(h.server)
  proxy.cut()
  await h.respawn()

  const events = await readSse(
    await fetch(`${h.server.url}/v1/sessions/${sid}/executions/${eid}/events`, { headers: { ...auth, accept: 'text/event-stream' } }),
  )
  t.equal(stdoutOf(events), 'second 2\n', 'its output, from the run the REPL had made')
  t.same(
    events.filter((e) => e.event === 'status').map((e) => e.data.state),
    ['queued', 'running'],
    'queued, then running, each once',
  )
  t.equal(events.at(-1)?.event, 'done')
  t.equal(events.at(-1)?.data.status, 'ok')
  t.equal(new Set(events.map((e) => e.id)).size, events.length, 'no event twice')

  const after = (await (await post(`/v1/sessions/${sid}/executions`, { code: 'print(n)' })).json()) as { events: Array<{ type: string; text?: string }> }
  t.same(
    after.events.filter((e) => e.type === 'stdout').map((e) => e.text),
    ['2\n'],
    'it ran once: the namespace counted it once',
  )
})
