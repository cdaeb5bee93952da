// An LLM turn cut off by an API crash is ended after the restart however many execution records
// came after it (its steps), not only when it is among the session's newest few.
import t from 'tap'
import { API_KEY } from './helpers/app.js'
import { api, readSse, stdoutOf, stdoutText, untilStdout } from './helpers/client.js'
import { isolatedServer, killHard } from './helpers/server-process.js'
import { gate, startFakeLlm } from './helpers/fake-llm.js'

const STEPS = 14

t.test(`an LLM turn cut off after ${STEPS} steps still ends with one done after the restart`, async (t) => {
  const llm = await startFakeLlm()
  const hold = gate()
  t.teardown(async () => {
    hold.open()
    await llm.close()
  })
  // Steps that never say FINAL, then one that is still running when the API dies.
  for (let i = 1; i < STEPS; i++) llm.script((_req, res) => res.stream([`print("step ${i}")\n`]))
  llm.script(async (_req, res) => {
    res.token('import time\nprint("thinking", flush=True)\ntime.sleep(30)\n')
    await hold.promise
  })
  const a = await isolatedServer(t, 'turn-steps', { OPENAI_BASE_URL: llm.baseURL, REPLCAST_MODEL: 'fake' })
  const auth = { authorization: `Bearer ${API_KEY}` }
  const { id: sid } = (await (await fetch(`${a.server.url}/v1/sessions`, { method: 'POST', headers: auth })).json()) as { id: string }
  const res = await fetch(`${a.server.url}/v1/sessions/${sid}/messages`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({ content: 'think', mode: 'agent', max_steps: STEPS + 1 }),
  })
  const turnId = res.headers.get('location')!.split('/').pop()!
  const before = await readSse(res, untilStdout('thinking\n'))
  const steps = Array.from({ length: STEPS - 1 }, (_, i) => `step ${i + 1}\n`).join('')
  t.equal(stdoutOf(before), `${steps}thinking\n`, `${STEPS} steps ran`)
  await killHard(a.server)
  await a.respawn()

  const events = await readSse(
    await fetch(`${a.server.url}/v1/sessions/${sid}/executions/${turnId}/events`, {
      headers: { ...auth, accept: 'text/event-stream' },
      signal: AbortSignal.timeout(30000),
    }),
  )
  t.equal(events.filter((e) => e.event === 'done').length, 1, 'exactly one done')
  t.equal(events.at(-1)?.data.status, 'killed')
  t.match(events.find((e) => e.event === 'error')?.data.evalue, /LLM turn/, 'an error event says why')
  const after = await api(a.server.url, 'POST', `/v1/sessions/${sid}/executions`, { code: 'print("usable")' })
  t.equal(stdoutText(after.body.events), 'usable\n', 'the session is usable')
})
