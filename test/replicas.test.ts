// Replicas behind a plain balancer: two real server processes on one Redis; every route that needs
// the session's sandbox is sent to the instance that does NOT hold it, and must be answered as the
// holder answers (JSON and SSE, uploads and downloads streamed), never with 421.
import t from 'tap'
import { createHash, randomBytes } from 'node:crypto'
import { API_KEY, containersOf } from './helpers/app.js'
import { api, createSession, executeSse, readSse, stdoutOf, stdoutText, untilStdout } from './helpers/client.js'
import { ofType, postMessage, startFakeLlm } from './helpers/fake-llm.js'
import { startReplicas } from './helpers/replicas.js'
import { waitFor } from './helpers/wait.js'

const auth = { authorization: `Bearer ${API_KEY}` }
const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex')

t.test('a session held by one instance is served whole through another', async (t) => {
  const llm = await startFakeLlm()
  t.teardown(() => llm.close())
  const r = await startReplicas(t, 2, { OPENAI_BASE_URL: llm.baseURL, OPENAI_API_KEY: 'fake-key' })
  const [a, b] = r.servers.map((s) => s.url) as [string, string]
  const sid = await createSession(a)
  t.equal(await r.holderOf(sid), 0, 'the instance that created the session holds it')

  const json = await api(b, 'POST', `/v1/sessions/${sid}/executions`, { code: 'x = 41\nprint(x)' })
  t.equal(json.status, 200, 'execute (JSON) through the other instance')
  t.equal(stdoutText(json.body.events), '41\n')
  t.match(json.headers.get('location'), new RegExp(`^/v1/sessions/${sid}/executions/exe_`), 'with the Location header')

  const sse = await executeSse(b, sid, 'print(x + 1)')
  t.equal(sse.status, 200, 'execute (SSE) through the other instance')
  t.equal(stdoutOf(sse.events), '42\n', 'in the same namespace')
  t.equal(ofType(sse.events, 'done').length, 1, 'one done')

  // Interrupt through B while the holder runs code.
  const long = await fetch(`${a}/v1/sessions/${sid}/executions`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({ code: 'import time\nprint("go", flush=True)\ntime.sleep(30)' }),
  })
  const started = await readSse(long, untilStdout('go\n'))
  t.equal(stdoutOf(started), 'go\n')
  const eid = long.headers.get('location')!.split('/').pop()!
  t.equal((await api(b, 'POST', `/v1/sessions/${sid}/interrupt`)).status, 202, 'interrupt through the other instance')
  const rest = await readSse(
    await fetch(`${b}/v1/sessions/${sid}/executions/${eid}/events`, { headers: { ...auth, accept: 'text/event-stream', 'last-event-id': started.at(-1)!.id } }),
  )
  t.equal(rest.at(-1)?.data.status, 'interrupted', 'the execution was interrupted')
  const none = await api(b, 'POST', `/v1/sessions/${sid}/interrupt`)
  t.equal(none.status, 409, "the holder's own answers come back")
  t.equal(none.body.code, 'nothing_running')

  // Files: a streamed upload and download, list, delete.
  const blob = randomBytes(3 * 1024 * 1024 + 17)
  const put = await fetch(`${b}/v1/sessions/${sid}/files/data/blob.bin`, { method: 'PUT', headers: auth, body: new Uint8Array(blob) })
  t.equal(put.status, 201, 'upload through the other instance')
  t.equal(put.headers.get('location'), `/v1/sessions/${sid}/files/data/blob.bin`)
  const got = await fetch(`${b}/v1/sessions/${sid}/files/data/blob.bin`, { headers: auth })
  t.equal(got.status, 200)
  t.equal(got.headers.get('content-length'), String(blob.length))
  t.equal(sha(new Uint8Array(await got.arrayBuffer())), sha(blob), 'the same bytes come back')
  const list = await api(b, 'GET', `/v1/sessions/${sid}/files?recursive=true`)
  t.same(
    list.body.files.map((f: any) => f.path),
    ['data', 'data/blob.bin'],
    'list through the other instance',
  )
  t.equal((await api(b, 'DELETE', `/v1/sessions/${sid}/files/data/blob.bin`)).status, 204)
  t.equal((await api(b, 'GET', `/v1/sessions/${sid}/files/data/blob.bin`)).body.code, 'file_not_found')

  // LLM turns, SSE and JSON.
  llm.script((_req, res) => res.stream(['print(x * 2)\n']))
  const turn = await postMessage(b, sid, { content: 'double it' })
  t.equal(turn.status, 200, 'a turn (SSE) through the other instance')
  t.equal(stdoutOf(turn.events), '82\n')
  llm.script((_req, res) => res.stream(['print(x - 1)\n']))
  const turnJson = await api(b, 'POST', `/v1/sessions/${sid}/messages`, { content: 'one less' })
  t.equal(turnJson.status, 200, 'a turn (JSON) through the other instance')
  t.equal(stdoutText(turnJson.body.events), '40\n')

  const restarted = await api(b, 'POST', `/v1/sessions/${sid}/restart`)
  t.equal(restarted.status, 200, 'restart through the other instance')
  const after = await api(b, 'POST', `/v1/sessions/${sid}/executions`, { code: 'print("x" in globals())' })
  t.equal(stdoutText(after.body.events), 'False\n', 'a fresh interpreter')
  t.equal(await r.holderOf(sid), 0, 'the session never moved')

  t.equal((await api(b, 'DELETE', `/v1/sessions/${sid}`)).status, 204, 'delete through the other instance')
  t.ok(await waitFor(async () => (await containersOf(r.deployment)).length === 0, 30_000), 'no container left')
})

t.test('round-robin over three instances: no request is refused', async (t) => {
  const r = await startReplicas(t, 3)
  const statuses: number[] = []
  const sids = [await createSession(r.next()), await createSession(r.next())]
  for (let i = 0; i < 12; i++) {
    const sid = sids[i % 2]!
    const res = await api(r.next(), 'POST', `/v1/sessions/${sid}/executions`, { code: `n = globals().get("n", 0) + 1\nprint(n)` })
    statuses.push(res.status)
  }
  t.same(new Set(statuses), new Set([200]), 'every execution answered 200')
  for (const sid of sids) {
    const res = await executeSse(r.next(), sid, 'print(n)')
    t.equal(stdoutOf(res.events), '6\n', 'each session ran all of its code in one namespace')
    t.equal((await api(r.next(), 'DELETE', `/v1/sessions/${sid}`)).status, 204)
  }
  t.ok(await waitFor(async () => (await containersOf(r.deployment)).length === 0, 30_000), 'no container left')
})
