// The API process is SIGKILLed (or SIGTERMed) mid-stream; a new process re-adopts the session and a
// client resuming with Last-Event-ID gets the rest of the events, none twice.
import t from 'tap'
import { API_KEY, containersOf, startApp } from './helpers/app.js'
import { api, readSse, stdoutOf, stdoutText, type SseEvent } from './helpers/client.js'
import { isolatedServer, killHard } from './helpers/server-process.js'
import { gate, startFakeLlm } from './helpers/fake-llm.js'

const LINES = 10
const CODE = `import time\nfor i in range(${LINES}):\n    print(f"tick {i}", flush=True)\n    time.sleep(0.3)\nprint("end")`
const EXPECTED = Array.from({ length: LINES }, (_, i) => `tick ${i}\n`).join('') + 'end\n'

t.test('an execution survives an API crash', async (t) => {
  const h = await isolatedServer(t, 'crash')
  const auth = { authorization: `Bearer ${API_KEY}` }
  const created = (await (
    await fetch(`${h.server.url}/v1/sessions`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: '{}' })
  ).json()) as { id: string }
  const sid = created.id
  const res = await fetch(`${h.server.url}/v1/sessions/${sid}/executions`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({ code: CODE }),
  })
  const eid = res.headers.get('location')!.split('/').pop()!
  let seen = 0
  const before = await readSse(res, (e) => e.event === 'stdout' && ++seen === 2)

  await killHard(h.server)
  await h.respawn()

  const after = await readSse(
    await fetch(`${h.server.url}/v1/sessions/${sid}/executions/${eid}/events`, {
      headers: { ...auth, accept: 'text/event-stream', 'last-event-id': before.at(-1)!.id },
    }),
  )
  const all: SseEvent[] = [...before, ...after]
  t.equal(stdoutOf(all), EXPECTED, 'every line arrived, in order')
  t.equal(new Set(all.map((e) => e.id)).size, all.length, 'no event twice')
  t.equal(all.at(-1)?.event, 'done')
  t.equal(all.at(-1)?.data.status, 'ok')
  t.equal(all.filter((e) => e.event === 'done').length, 1, 'one done')

  const next = (await (
    await fetch(`${h.server.url}/v1/sessions/${sid}/executions`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ code: 'print(i)' }),
    })
  ).json()) as { events: Array<{ type: string; text?: string }> }
  t.equal(stdoutText(next.events), `${LINES - 1}\n`, 'the namespace survived too')
})

t.test('SIGTERM ends open streams with a final event, exits cleanly and leaves sandboxes running', async (t) => {
  const h = await isolatedServer(t, 'term', { LOG_LEVEL: 'info' })
  const auth = { authorization: `Bearer ${API_KEY}` }
  const { id: sid } = (await (await fetch(`${h.server.url}/v1/sessions`, { method: 'POST', headers: auth })).json()) as { id: string }
  const res = await fetch(`${h.server.url}/v1/sessions/${sid}/executions`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({ code: CODE }),
  })
  const eid = res.headers.get('location')!.split('/').pop()!
  const exited = new Promise<number | null>((r) => h.server.child.once('exit', (code) => r(code)))
  let signalled = false
  const events = await readSse(res, (e) => {
    if (e.event === 'stdout' && !signalled) {
      signalled = true
      h.server.child.kill('SIGTERM')
    }
    return e.event === 'shutdown'
  })
  t.equal(events.at(-1)?.event, 'shutdown', 'the open stream got a final event telling the client to resume')
  t.equal(await exited, 0, 'the process exited cleanly')
  t.match(h.server.output(), /shutting down/, 'the shutdown is logged')
  const running = (await containersOf(h.env.REPLCAST_DEPLOYMENT!)).filter((c) => c.State === 'running')
  t.equal(running.length, 1, 'the sandbox keeps running for re-adoption')

  await h.respawn()
  const lastId = events.filter((e) => e.id).at(-1)!.id
  const rest = await readSse(
    await fetch(`${h.server.url}/v1/sessions/${sid}/executions/${eid}/events`, { headers: { ...auth, accept: 'text/event-stream', 'last-event-id': lastId } }),
  )
  const all = stdoutOf([...events, ...rest])
  t.equal(all, EXPECTED, 'the resumed stream completes the output')
})

t.test('a busy session whose API instance died is taken over by another instance, which enforces its timeout', async (t) => {
  const fast = { LEASE_TTL_MS: '1000', REAPER_INTERVAL_MS: '200', INTERRUPT_GRACE_MS: '500' }
  const a = await isolatedServer(t, 'dead', fast)
  const auth = { authorization: `Bearer ${API_KEY}` }
  const { id: sid } = (await (
    await fetch(`${a.server.url}/v1/sessions`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: '{"idle_timeout_s": 1}' })
  ).json()) as { id: string }
  const res = await fetch(`${a.server.url}/v1/sessions/${sid}/executions`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({ code: 'import time\nprint("start", flush=True)\ntime.sleep(60)', timeout_s: 2 }),
  })
  const eid = res.headers.get('location')!.split('/').pop()!
  await readSse(res, (e) => e.event === 'stdout')
  await killHard(a.server) // and never comes back

  const b = await startApp(t, { ...fast, REPLCAST_KEY_PREFIX: a.env.REPLCAST_KEY_PREFIX!, REPLCAST_DEPLOYMENT: a.env.REPLCAST_DEPLOYMENT! })
  const events = await readSse(await fetch(`${b.url}/v1/sessions/${sid}/executions/${eid}/events`, { headers: { ...auth, accept: 'text/event-stream' } }))
  t.equal(stdoutOf(events), 'start\n')
  t.equal(events.at(-1)?.event, 'done', 'the follower on the other instance gets the end')
  t.equal(events.at(-1)?.data.status, 'timeout', "the execution's timeout was enforced by the instance that took over")
  const after = await api(b.url, 'POST', `/v1/sessions/${sid}/executions`, { code: 'print("alive")' })
  t.equal(stdoutText(after.body.events), 'alive\n', 'and the session works there')
})

t.test('an LLM turn cut off by an API crash still ends with one done after the restart', async (t) => {
  const llm = await startFakeLlm()
  const hold = gate()
  t.teardown(async () => {
    hold.open()
    await llm.close()
  })
  llm.script(async (_req, res) => {
    res.token('import time\nprint("thinking", flush=True)\ntime.sleep(30)\n')
    await hold.promise
  })
  const a = await isolatedServer(t, 'turn', { OPENAI_BASE_URL: llm.baseURL, REPLCAST_MODEL: 'fake' })
  const auth = { authorization: `Bearer ${API_KEY}` }
  const { id: sid } = (await (await fetch(`${a.server.url}/v1/sessions`, { method: 'POST', headers: auth })).json()) as { id: string }
  const res = await fetch(`${a.server.url}/v1/sessions/${sid}/messages`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({ content: 'think' }),
  })
  const turnId = res.headers.get('location')!.split('/').pop()!
  await readSse(res, (e) => e.event === 'stdout')
  await killHard(a.server)
  await a.respawn()
  const events = await readSse(
    await fetch(`${a.server.url}/v1/sessions/${sid}/executions/${turnId}/events`, { headers: { ...auth, accept: 'text/event-stream' } }),
  )
  t.equal(events.filter((e) => e.event === 'done').length, 1, 'exactly one done')
  t.equal(events.at(-1)?.data.status, 'killed')
  t.match(events.find((e) => e.event === 'error')?.data.evalue, /LLM turn/, 'an error event says why')
  const after = await api(a.server.url, 'POST', `/v1/sessions/${sid}/executions`, { code: 'print("usable")' })
  t.equal(stdoutText(after.body.events), 'usable\n', 'the session is usable')
})
