// Redis becomes unreachable while an execution's output is being written: that write fails, after
// its events may have been handed to the execution's readers under the ids Redis would give them.
// The instance writes nothing more of it (a later event would take those ids in Redis) and lets the
// session go; adopted again once Redis is back, the output is appended from the container's log under
// the same ids. Every reader gets every line once, and the stored log is what they got.
import t from 'tap'
import { API_KEY } from './helpers/app.js'
import { readSse, stdoutOf } from './helpers/client.js'
import { redisProxy } from './helpers/redis-proxy.js'
import { isolatedServer } from './helpers/server-process.js'
import { waitFor } from './helpers/wait.js'

t.test('output whose write failed in a Redis outage reaches its reader and the log once', async (t) => {
  const proxy = await redisProxy(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379')
  t.teardown(() => proxy.close())
  const h = await isolatedServer(t, 'outage', { REDIS_URL: proxy.url, LEASE_TTL_MS: '3000' })
  const auth = { authorization: `Bearer ${API_KEY}` }
  const { id: sid } = (await (
    await fetch(`${h.server.url}/v1/sessions`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: '{}' })
  ).json()) as { id: string }

  // The write of the first line is held, then Redis goes away under it.
  proxy.holdWhen = [Buffer.from('before-the-outage')]
  // (The line is put together at run time: the code's own record, which holds its text, must pass.)
  const code = 'import time\nprint("before-" + "the-outage", flush=True)\ntime.sleep(3)\nprint("after-it", flush=True)'
  const live = fetch(`${h.server.url}/v1/sessions/${sid}/executions`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({ code }),
  })
  await proxy.started
  proxy.down()
  t.ok(await waitFor(() => h.server.output().includes('event append failed'), 30_000), 'the write failed')
  await proxy.up()

  const res = await live
  const eid = res.headers.get('location')!.split('/').pop()!
  let got = await readSse(res, (e) => e.event === 'done')
  if (got.at(-1)?.event !== 'done') {
    // The stream broke: resumed after the last event it had, as a client does.
    const more = await fetch(`${h.server.url}/v1/sessions/${sid}/executions/${eid}/events`, {
      headers: { ...auth, accept: 'text/event-stream', 'last-event-id': got.at(-1)?.id ?? '' },
    })
    got = [...got, ...(await readSse(more, (e) => e.event === 'done'))]
  }
  t.equal(stdoutOf(got), 'before-the-outage\nafter-it\n', 'its reader got every line once')
  t.equal(got.at(-1)?.event, 'done')
  t.equal(new Set(got.map((e) => e.id)).size, got.length, 'no id twice')

  const stored = await readSse(
    await fetch(`${h.server.url}/v1/sessions/${sid}/executions/${eid}/events`, { headers: { ...auth, accept: 'text/event-stream' } }),
  )
  t.same(
    stored.map((e) => [e.id, e.event, e.data.text]),
    got.map((e) => [e.id, e.event, e.data.text]),
    'the stored log is what the reader got, id for id',
  )
})
