// Every request logs with its own request id and, once they are known, its tenant, session and
// execution: fields added to that request's logger alone, never carried into the next request's.
import t from 'tap'
import { OTHER_KEY, startApp } from './helpers/app.js'
import { api, createSession, executeSse } from './helpers/client.js'

interface Line {
  msg: string
  reqId?: string
  tenant?: string
  sessionId?: string
  executionId?: string
  req?: { url?: string }
  res?: { statusCode?: number }
}

t.test("a request's log lines carry its ids, and the next request's lines only theirs", async (t) => {
  const lines: string[] = []
  const h = await startApp(t, {}, { logLines: lines })
  const sid = await createSession(h.url)
  const { events } = await executeSse(h.url, sid, 'print(1)')
  const eid = events.find((e) => e.event === 'status')?.data.execution_id as string
  t.ok(eid, 'the execution ran')
  t.equal((await api(h.url, 'GET', '/healthz', undefined, { key: '' })).status, 200)
  t.equal((await api(h.url, 'GET', `/v1/sessions/${sid}`, undefined, { key: OTHER_KEY })).status, 404)

  const logs = lines.map((l) => JSON.parse(l) as Line)
  const started = logs.filter((l) => l.msg === 'incoming request')
  const completed = logs.filter((l) => l.msg === 'request completed')
  t.equal(new Set(completed.map((l) => l.reqId)).size, 4, 'four requests, four request ids')
  const [create, execute, health, other] = completed
  t.match(create, { tenant: 'alpha', sessionId: sid, res: { statusCode: 201 } }, 'the create: its tenant and its new session')
  t.equal(create!.executionId, undefined)
  t.match(execute, { tenant: 'alpha', sessionId: sid, executionId: eid }, 'the execution: its tenant, session and execution')
  t.equal(health!.tenant, undefined, 'a request with no key: no tenant from the one before')
  t.equal(health!.sessionId, undefined)
  t.equal(other!.tenant, 'beta', "another tenant's request: its own tenant")
  t.equal(other!.sessionId, undefined, 'and no session or execution of an earlier request')
  t.equal(other!.executionId, undefined)
  for (const l of started) t.equal(l.tenant, undefined, 'nothing is bound before the request is authenticated')
})

t.test('an access token is redacted from the log however its name is spelled', async (t) => {
  const lines: string[] = []
  const h = await startApp(t, {}, { logLines: lines })
  const sid = await createSession(h.url)
  const run = await api(h.url, 'POST', `/v1/sessions/${sid}/executions`, { code: 'print(1)' })
  const events = `/v1/sessions/${sid}/executions/${run.body.id as string}/events`
  for (const name of ['access_token', 'access%5Ftoken', 'access%5ftoken', '%61ccess_token']) {
    const token = (await api(h.url, 'POST', `${events}-token`)).body.token as string
    const res = await api(h.url, 'GET', `${events}?${name}=${encodeURIComponent(token)}`, undefined, { key: '', headers: { accept: 'text/event-stream' } })
    t.equal(res.status, 200, `?${name}= is accepted as the token`)
    const leaked = lines.filter((l) => l.includes(token.split('.')[1]!))
    t.same(leaked, [], `and its value is in no log line`)
    t.ok(
      lines.some((l) => l.includes(`${name}=[redacted]`)),
      'the line shows the name as sent, its value redacted',
    )
  }
})
