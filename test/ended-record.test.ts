// An execution's record keeps what re-queues it after an API restart (its code, which may be as
// large as a request body) only while it has not ended: for the hour its record and log are kept
// after that, Redis holds its status and times, not the code. A reader of an ended execution whose
// log is gone is told at once that nothing is left.
import t from 'tap'
import { API_KEY, startApp } from './helpers/app.js'
import { api } from './helpers/client.js'

t.test('an ended execution keeps its record without its code', async (t) => {
  const h = await startApp(t)
  const sid = (await api(h.url, 'POST', '/v1/sessions', {})).body.id as string
  const code = `# ${'x'.repeat(50_000)}\nprint(1)`
  const run = await api(h.url, 'POST', `/v1/sessions/${sid}/executions`, { code })
  t.equal(run.body.status, 'ok')
  const key = `${h.prefix}{${sid}}:exec:${run.body.id as string}`
  const rec = await h.redis.hgetall(key)
  t.equal(rec.status, 'ok', 'the record says how it ended')
  t.ok(rec.ended_at && rec.duration_ms, 'and when')
  t.same(
    ['code', 'kind', 'timeout_ms'].filter((f) => f in rec),
    [],
    'nothing that only re-queues it is kept',
  )
  const bytes = (await h.redis.memory('USAGE', key)) ?? 0
  t.ok(bytes < 1000, `the record takes ${bytes} B, not the code's 50 kB`)
  t.ok((await h.redis.ttl(key)) > 0, 'and expires')
  const read = await api(h.url, 'GET', `/v1/sessions/${sid}/executions/${run.body.id as string}`)
  t.equal(read.body.status, 'ok', 'GET still answers it')
})

t.test('an SSE reader of an ended execution whose log is gone gets 204 at once', async (t) => {
  const h = await startApp(t)
  const sid = (await api(h.url, 'POST', '/v1/sessions', {})).body.id as string
  const run = await api(h.url, 'POST', `/v1/sessions/${sid}/executions`, { code: 'print(1)' })
  t.equal(run.body.status, 'ok')
  const eid = run.body.id as string
  // As when it expires before its record, or goes with its session while the reader asks.
  t.equal(await h.redis.del(`${h.prefix}{${sid}}:events:${eid}`), 1)
  const res = await fetch(`${h.url}/v1/sessions/${sid}/executions/${eid}/events`, {
    headers: { authorization: `Bearer ${API_KEY}`, accept: 'text/event-stream' },
  })
  t.equal(res.status, 204, 'no stream without a content type, and no wait')
  t.equal(await res.text(), '')
})
