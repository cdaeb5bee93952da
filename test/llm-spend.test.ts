// LLM spend is charged when it is spent: a model call abandoned after it left keeps its whole
// grant in the tenant's budget (the model may have made, and billed, the completion), and every
// attempt of a retried call is charged. The LLM is the fake OpenAI-compatible server.
import t, { type Test } from 'tap'
import { redisKeys } from '../src/store/keys.js'
import { startApp, type Harness } from './helpers/app.js'
import { api, createSession, executeSse, stdoutOf } from './helpers/client.js'
import { postMessage, startFakeLlm, type FakeLlm } from './helpers/fake-llm.js'

/** The apps' clock starts at the beginning of a minute when the file starts, so no test straddles a window (see llm-budget.test.ts). */
const skew = Date.now() % 60_000
const now = () => Date.now() - skew

/** The tenant's calls and tokens counted in this minute's window and today's. */
async function spent(h: Harness, tenant = 'alpha'): Promise<{ calls: number; tokens: number; tokensToday: number }> {
  const keys = redisKeys(h.prefix)
  const minute = `m${Math.floor(now() / 60_000)}`
  const day = `d${Math.floor(now() / 86_400_000)}`
  const [calls, tokens, tokensToday] = await h.redis.mget(
    keys.tenantLlm(tenant, 'calls', minute),
    keys.tenantLlm(tenant, 'tokens', minute),
    keys.tenantLlm(tenant, 'tokens', day),
  )
  return { calls: Number(calls ?? 0), tokens: Number(tokens ?? 0), tokensToday: Number(tokensToday ?? 0) }
}

async function setup(t: Test): Promise<{ llm: FakeLlm; h: Harness; sid: string }> {
  const llm = await startFakeLlm()
  t.teardown(() => llm.close())
  const h = await startApp(t, { OPENAI_BASE_URL: llm.baseURL }, { now })
  return { llm, h, sid: await createSession(h.url) }
}

t.test('an llm_query left running when its execution ends keeps its whole grant', async (t) => {
  const { llm, h, sid } = await setup(t)
  llm.script(() => undefined) // the model holds its answer
  const run = executeSse(
    h.url,
    sid,
    ['import threading, time', "threading.Thread(target=lambda: llm_query('x'), daemon=True).start()", 'time.sleep(600)'].join('\n'),
  )
  const req = await llm.requestArrived(1)
  t.equal((await api(h.url, 'POST', `/v1/sessions/${sid}/interrupt`)).status, 202)
  t.equal((await run).events.at(-1)?.data.status, 'interrupted', 'the cell ended; its thread still waits for the model')
  await req.closed // the execution's end gave the call up
  // An execution's writes go on the API's Redis connection after the settling of the call given up.
  t.equal(stdoutOf((await executeSse(h.url, sid, 'print(1)')).events), '1\n')
  const grant = 1 + req.body.max_tokens // the prompt 'x' is estimated at 1 token
  t.same(await spent(h), { calls: 1, tokens: grant, tokensToday: grant }, 'charged the prompt and the whole completion it asked for')
})

t.test('a call retried after an HTTP 500 is charged for both attempts', async (t) => {
  const { llm, h, sid } = await setup(t)
  llm.script(
    (_req, res) => res.fail(500, 'overloaded', true),
    (_req, res) => res.json('ok', { prompt_tokens: 25, completion_tokens: 5, total_tokens: 30 }),
  )
  const r = await executeSse(h.url, sid, 'print(llm_query("x"))')
  t.equal(stdoutOf(r.events), 'ok\n', 'the retry answered')
  t.equal(llm.requests.length, 2, 'two requests reached the model')
  // The failed attempt reported no use: its whole grant; the retry its reported 30 tokens.
  const grant = 1 + llm.requests[0]!.body.max_tokens
  t.same(await spent(h), { calls: 2, tokens: grant + 30, tokensToday: grant + 30 })
})

t.test("a turn's reply cut short by an interrupt keeps its whole grant", async (t) => {
  const { llm, h, sid } = await setup(t)
  llm.script((_req, res) => res.begun()) // the reply starts, then holds
  const turn = postMessage(h.url, sid, { content: 'go' })
  const req = await llm.requestArrived(1)
  t.equal((await api(h.url, 'POST', `/v1/sessions/${sid}/interrupt`)).status, 202)
  const r = await turn
  t.equal(r.events.at(-1)?.data.status, 'interrupted')
  // The turn writes its done after its reply was settled, on the same Redis connection.
  const need = Math.ceil(req.messages.reduce((n, m) => n + m.content.length, 0) / 4)
  const grant = need + req.body.max_tokens
  t.same(await spent(h), { calls: 1, tokens: grant, tokensToday: grant }, 'charged the prompt and the whole completion it asked for')
})
