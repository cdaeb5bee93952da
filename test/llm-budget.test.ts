// Per-tenant LLM spend: calls and tokens per minute (and per day), counted in Redis so they hold
// across executions, LLM turns and API instances. The LLM is the fake OpenAI-compatible server.
import t from 'tap'
import { OTHER_KEY, startApp } from './helpers/app.js'
import { api, createSession, executeSse, stdoutOf, type SseEvent } from './helpers/client.js'
import { ofType, postMessage, startFakeLlm, tokens, type FakeLlm } from './helpers/fake-llm.js'

/** Calls llm_query `n` times in one execution; prints how many were answered, how many refused, and the first refusal. */
const loop = (n: number) =>
  [
    'ok, refused, first = 0, 0, None',
    `for i in range(${n}):`,
    '    try:',
    '        llm_query("x")',
    '        ok += 1',
    '    except LLMError as e:',
    '        refused += 1',
    '        first = first or str(e)',
    'print(ok, refused)',
    'print(first)',
  ].join('\n')

/** Sub-calls (plain completions) answer "ok" and report `total` tokens used; turn replies stream `print(1)`. */
function answerWith(llm: FakeLlm, total: number): void {
  llm.fallback = (req, res) => {
    if (req.stream) res.stream(tokens('print(1)\n'))
    else res.json('ok', { prompt_tokens: total - 5, completion_tokens: 5, total_tokens: total })
  }
}

/**
 * Fixed windows are keyed by the minute: a test that straddles a minute boundary would see two
 * windows. The apps under test get a clock that starts at the beginning of a minute when the file
 * starts, so every window here lasts a full minute of real time.
 */
const skew = Date.now() % 60_000
const now = () => Date.now() - skew

const limitsOf = (events: SseEvent[]) => ofType(events, 'limit').map((e) => e.data.what)

t.test('calls per minute', async (t) => {
  const llm = await startFakeLlm()
  t.teardown(() => llm.close())
  answerWith(llm, 15)
  const env = { OPENAI_BASE_URL: llm.baseURL, REPLCAST_TENANT_LIMITS: JSON.stringify({ alpha: { llm_calls_per_minute: 5 } }) }
  const h = await startApp(t, env, { now })
  const sid = await createSession(h.url)

  t.test('a loop of 20 llm_query calls: 5 reach the model, 15 raise LLMError, one limit event', async (t) => {
    const before = llm.requests.length
    const r = await executeSse(h.url, sid, loop(20))
    t.equal(r.events.at(-1)?.data.status, 'ok')
    const [counts, first] = stdoutOf(r.events).split('\n')
    t.equal(counts, '5 15')
    t.match(first, /^tenant LLM budget exhausted: 5 calls per minute; retry after \d+ s$/)
    t.equal(llm.requests.length - before, 5, 'exactly 5 calls reached the model')
    t.same(limitsOf(r.events), ['llm_calls'], 'one limit event says what ran out')
  })

  t.test('another tenant is unaffected', async (t) => {
    const before = llm.requests.length
    const other = await createSession(h.url, {}, OTHER_KEY)
    const r = await executeSse(h.url, other, loop(3), { key: OTHER_KEY })
    t.equal(stdoutOf(r.events), '3 0\nNone\n')
    t.equal(llm.requests.length - before, 3)
    t.same(limitsOf(r.events), [])
  })

  t.test('the budget holds across executions', async (t) => {
    const before = llm.requests.length
    const r = await executeSse(h.url, sid, loop(3))
    t.match(stdoutOf(r.events), /^0 3\ntenant LLM budget exhausted: 5 calls per minute/)
    t.equal(llm.requests.length, before, 'nothing reached the model')
    t.same(limitsOf(r.events), ['llm_calls'])
  })

  t.test('the budget holds across API instances on one Redis', async (t) => {
    const h2 = await startApp(t, { ...env, REPLCAST_KEY_PREFIX: h.prefix, REPLCAST_DEPLOYMENT: h.deployment }, { now })
    const sid2 = await createSession(h2.url)
    const before = llm.requests.length
    const r = await executeSse(h2.url, sid2, loop(3))
    t.match(stdoutOf(r.events), /^0 3\ntenant LLM budget exhausted/)
    t.equal(llm.requests.length, before, 'nothing reached the model')
  })

  t.test('a new turn over budget is a 429 with Retry-After', async (t) => {
    const before = llm.requests.length
    const r = await api(h.url, 'POST', `/v1/sessions/${sid}/messages`, { content: 'hello' })
    t.equal(r.status, 429)
    t.equal(r.body.code, 'llm_budget_exhausted')
    t.match(r.body.detail, /tenant LLM budget exhausted: 5 calls per minute/)
    t.match(r.headers.get('content-type'), /application\/problem\+json/)
    const retryAfter = Number(r.headers.get('retry-after'))
    t.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After is within the minute (${retryAfter})`)
    t.equal(llm.requests.length, before)
  })
})

t.test('tokens per minute', async (t) => {
  const llm = await startFakeLlm()
  t.teardown(() => llm.close())
  answerWith(llm, 30)
  const limits = { alpha: { llm_tokens_per_minute: 100 }, beta: { llm_calls_per_day: 2 } }
  const h = await startApp(t, { OPENAI_BASE_URL: llm.baseURL, REPLCAST_TENANT_LIMITS: JSON.stringify(limits) }, { now })
  const sid = await createSession(h.url)
  const r = await executeSse(h.url, sid, loop(20))
  const [counts, first] = stdoutOf(r.events).split('\n')
  // Each call reserves what is left (its prompt and the completion it may ask for) and is charged
  // its reported use, 30 tokens: 30, 60, 90, 120 used; the fifth finds nothing left.
  t.equal(counts, '4 16')
  t.match(first, /^tenant LLM budget exhausted: 100 tokens per minute; retry after \d+ s$/)
  t.same(
    llm.requests.map((q) => q.body.max_tokens),
    [99, 69, 39, 9],
    "each call's max_tokens is what the tenant's budget had left",
  )
  t.same(limitsOf(r.events), ['llm_tokens'])

  // Per day likewise (beta), with the day's end as Retry-After.
  const other = await createSession(h.url, {}, OTHER_KEY)
  const day = await executeSse(h.url, other, loop(3), { key: OTHER_KEY })
  t.match(stdoutOf(day.events), /^2 1\ntenant LLM budget exhausted: 2 calls per day; retry after \d+ s\n$/)
  t.same(limitsOf(day.events), ['llm_calls'])
})

t.test("a turn's own model calls count", async (t) => {
  const llm = await startFakeLlm()
  t.teardown(() => llm.close())
  answerWith(llm, 15)
  const h = await startApp(t, { OPENAI_BASE_URL: llm.baseURL, REPLCAST_TENANT_LIMITS: JSON.stringify({ alpha: { llm_calls_per_minute: 2 } }) }, { now })
  const sid = await createSession(h.url)
  // Step 1's reply is call 1, its llm_query call 2; step 2's reply would be call 3.
  llm.script((_req, res) => res.stream(tokens('print("sub:", llm_query("q"))\n')))
  const r = await postMessage(h.url, sid, { content: 'go', mode: 'agent' })
  t.equal(llm.requests.length, 2, 'two calls reached the model')
  t.match(stdoutOf(r.events), /sub: ok/)
  const errors = ofType(r.events, 'error')
  t.equal(errors.length, 1)
  t.equal(errors[0]!.data.ename, 'LLMError')
  t.match(errors[0]!.data.evalue, /^tenant LLM budget exhausted: 2 calls per minute; retry after \d+ s$/)
  t.same(limitsOf(r.events), ['llm_calls'])
  t.equal(ofType(r.events, 'done').length, 1)
  t.equal(r.events.at(-1)!.data.status, 'error')
  const next = await api(h.url, 'POST', `/v1/sessions/${sid}/messages`, { content: 'again' })
  t.equal(next.status, 429)
  t.equal(next.body.code, 'llm_budget_exhausted')
  const ran = await executeSse(h.url, sid, 'print(1 + 1)')
  t.equal(stdoutOf(ran.events), '2\n', 'the session still runs code')
})
