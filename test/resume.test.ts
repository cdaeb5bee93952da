// Clients that disconnect and come back with Last-Event-ID lose and repeat nothing.
import t from 'tap'
import { API_KEY, startApp } from './helpers/app.js'
import { api, createSession, readSse, stdoutOf } from './helpers/client.js'

const CODE = 'import time\nfor i in range(8):\n    print(f"line {i}", flush=True)\n    time.sleep(0.15)'
const EXPECTED = Array.from({ length: 8 }, (_, i) => `line ${i}\n`).join('')

function events(base: string, sid: string, eid: string, lastId?: string, query = ''): Promise<Response> {
  return fetch(`${base}/v1/sessions/${sid}/executions/${eid}/events${query}`, {
    headers: { authorization: `Bearer ${API_KEY}`, accept: 'text/event-stream', ...(lastId ? { 'last-event-id': lastId } : {}) },
  })
}

t.test('resuming by Last-Event-ID', async (t) => {
  const h = await startApp(t)
  const sid = await createSession(h.url)

  t.test('a client that leaves mid-stream and resumes gets every later event exactly once', async (t) => {
    const res = await fetch(`${h.url}/v1/sessions/${sid}/executions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ code: CODE }),
    })
    const location = res.headers.get('location')!
    const eid = location.split('/').pop()!
    let stdoutSeen = 0
    const first = await readSse(res, (e) => e.event === 'stdout' && ++stdoutSeen === 3)
    const lastId = first.at(-1)!.id
    const rest = await readSse(await events(h.url, sid, eid, lastId))
    const all = [...first, ...rest]
    t.equal(stdoutOf(all), EXPECTED, 'the stdout is complete and in order')
    t.equal(new Set(all.map((e) => e.id)).size, all.length, 'no event twice')
    t.equal(all.filter((e) => e.event === 'done').length, 1, 'one done')
    const ids = all.map((e) => e.id)
    t.same(ids, [...ids].sort(compareIds), 'ids increase')

    const full = await readSse(await events(h.url, sid, eid))
    t.same(
      full.map((e) => e.id),
      ids,
      'a replay from the start returns the same events',
    )
    const viaQuery = await readSse(await events(h.url, sid, eid, undefined, `?after=${encodeURIComponent(lastId)}`))
    t.same(
      viaQuery.map((e) => e.id),
      rest.map((e) => e.id),
      '?after= works like Last-Event-ID',
    )

    const atEnd = await events(h.url, sid, eid, all.at(-1)!.id)
    t.equal(atEnd.status, 204, 'resuming at done answers 204 so EventSource stops')
    await atEnd.text()
  })

  t.test('an execution keeps running when its client goes away', async (t) => {
    const res = await fetch(`${h.url}/v1/sessions/${sid}/executions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ code: CODE }),
    })
    const location = res.headers.get('location')!
    await readSse(res, (e) => e.event === 'stdout') // then disconnect
    const rest = await readSse(await events(h.url, sid, location.split('/').pop()!))
    t.equal(stdoutOf(rest), EXPECTED)
    const ex = await api(h.url, 'GET', location)
    t.equal(ex.body.status, 'ok')
  })

  t.test('browsers: a short-lived token in ?access_token= replaces the Authorization header for one execution', async (t) => {
    const a = await api(h.url, 'POST', `/v1/sessions/${sid}/executions`, { code: 'print("for the browser")' })
    const b = await api(h.url, 'POST', `/v1/sessions/${sid}/executions`, { code: 'print("other")' })
    const minted = await api(h.url, 'POST', `/v1/sessions/${sid}/executions/${a.body.id}/events-token`)
    t.equal(minted.status, 201)
    t.ok(Date.parse(minted.body.expires_at) > Date.now(), 'expires in the future')
    const url = (eid: string, token: string) => `${h.url}/v1/sessions/${sid}/executions/${eid}/events?access_token=${encodeURIComponent(token)}`
    const ok = await fetch(url(a.body.id, minted.body.token), { headers: { accept: 'text/event-stream' } })
    t.equal(ok.status, 200)
    t.equal(stdoutOf(await readSse(ok)), 'for the browser\n')
    const wrongExecution = await fetch(url(b.body.id, minted.body.token), { headers: { accept: 'text/event-stream' } })
    t.equal(wrongExecution.status, 401, 'the token is for one execution only')
    await wrongExecution.text()
    const tampered = await fetch(
      url(
        a.body.id,
        minted.body.token.replace(/.$/, (c: string) => (c === 'A' ? 'B' : 'A')),
      ),
      { headers: { accept: 'text/event-stream' } },
    )
    t.equal(tampered.status, 401, 'a tampered token is refused')
    await tampered.text()
    const elsewhere = await api(h.url, 'GET', `/v1/sessions/${sid}?access_token=${encodeURIComponent(minted.body.token)}`, undefined, { key: '' })
    t.equal(elsewhere.status, 401, 'the token opens nothing but the events stream')
  })

  t.test('bad resume positions are rejected, unknown executions are 404', async (t) => {
    const ex = await api(h.url, 'POST', `/v1/sessions/${sid}/executions`, { code: '1' })
    const overflow = await events(h.url, sid, ex.body.id, '99999999999999999999-0')
    t.equal(overflow.status, 400, 'an id beyond 64 bits is a 400')
    t.equal((await overflow.json()).code, 'validation_failed')
    const largest = await events(h.url, sid, ex.body.id, '18446744073709551615-18446744073709551615')
    t.equal(largest.status, 204, 'nothing follows the largest id of an ended execution')
    await largest.text()
    const bad = await fetch(`${h.url}/v1/sessions/${sid}/executions/exe_AAAAAAAAAAAAAAAAAAAA/events`, {
      headers: { authorization: `Bearer ${API_KEY}`, accept: 'text/event-stream' },
    })
    t.equal(bad.status, 404)
    t.equal((await bad.json()).code, 'execution_not_found')
  })
})

function compareIds(a: string, b: string): number {
  const [am, as] = a.split('-').map(BigInt)
  const [bm, bs] = b.split('-').map(BigInt)
  return am! === bm! ? Number(as! - bs!) : am! < bm! ? -1 : 1
}
