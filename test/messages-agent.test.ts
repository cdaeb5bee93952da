// Self-correction in stream mode, and the recursive-LM loop in agent mode: context as a REPL
// variable, llm_query answered from inside the sandbox, FINAL, truncated step output, budgets.
import t from 'tap'
import { startApp } from './helpers/app.js'
import { createSession, stdoutOf } from './helpers/client.js'
import { codeOf, gate, ofType, postMessage, startFakeLlm, tokens, type Handler } from './helpers/fake-llm.js'

const code =
  (src: string): Handler =>
  (_req, res) =>
    res.stream(tokens(src, 7))

t.test('self-correction and the agent loop', async (t) => {
  const llm = await startFakeLlm()
  t.teardown(() => llm.close())
  const h = await startApp(t, { OPENAI_BASE_URL: llm.baseURL, REPLCAST_MODEL: 'fake-coder', REPLCAST_MODELS: 'fake-small' })
  const sid = await createSession(h.url)

  t.test('an error goes back to the model, which continues from the current state', async (t) => {
    const before = llm.requests.length
    llm.script(
      code('print("before")\ncount = 10\nprint(undefined_name)\nprint("never")\n'),
      code('undefined_name = count + 5\nprint("fixed", undefined_name)\n'),
    )
    const r = await postMessage(h.url, sid, { content: 'go' })
    t.equal(stdoutOf(r.events), 'before\nfixed 15\n', 'the correction reused `count` from the failed attempt')
    const errors = ofType(r.events, 'error')
    t.equal(errors.length, 1)
    t.equal(errors[0]!.data.ename, 'NameError')
    t.equal(errors[0]!.data.step, 1)
    t.ok(
      ofType(r.events, 'code').some((e) => e.data.step === 2),
      'the correction streams as step 2',
    )
    const errorAt = r.events.indexOf(errors[0]!)
    const fixAt = r.events.findIndex((e) => e.event === 'code' && e.data.step === 2)
    t.ok(fixAt > errorAt, 'the client sees the error, then the correction')
    t.equal(ofType(r.events, 'done').length, 1)
    t.equal(r.events.at(-1)!.data.status, 'ok')
    t.equal(llm.requests.length - before, 2)
    const retry = llm.requests.at(-1)!.messages
    t.equal(retry.at(-2)!.role, 'assistant')
    t.match(retry.at(-2)!.content, /print\(undefined_name\)/)
    t.match(retry.at(-1)!.content, /NameError: name 'undefined_name' is not defined/)
    t.match(retry.at(-1)!.content, /before/)
  })

  t.test('attempts are bounded', async (t) => {
    const before = llm.requests.length
    llm.script(code('1/0\n'), code('1/0\n'))
    const r = await postMessage(h.url, sid, { content: 'divide', max_attempts: 2 })
    t.equal(ofType(r.events, 'error').length, 2)
    t.equal(llm.requests.length - before, 2)
    t.equal(ofType(r.events, 'done').length, 1)
    t.equal(r.events.at(-1)!.data.status, 'error')
  })

  t.test('agent mode reaches FINAL after several steps with llm_query answered from the sandbox', async (t) => {
    const before = llm.requests.length
    const context = 'x'.repeat(2_000_000) + ' the secret code is 7 '
    llm.script(
      code('print(len(context))\nprint("y" * 500)\n'),
      code('tail = context[-30:]\nans = llm_query("What is the code in: " + tail)\nprint("sub:", ans)\n'),
      (req, res) => res.json(`I read: ${req.messages[0]!.content.slice(-12)}`),
      code('FINAL_VAR("ans")\n'),
    )
    const r = await postMessage(h.url, sid, { content: 'Find the secret code', mode: 'agent', context, output_chars: 200, model: 'fake-small' })
    t.equal(r.status, 200)
    const finals = ofType(r.events, 'final')
    t.equal(finals.length, 1)
    t.equal(finals[0]!.data.value, 'I read: t code is 7 ')
    t.equal(r.events.at(-1)!.event, 'done')
    t.equal(r.events.at(-1)!.data.status, 'ok')
    t.equal(ofType(r.events, 'done').length, 1)
    const calls = ofType(r.events, 'llm_call')
    t.equal(calls.length, 1)
    t.equal(calls[0]!.data.prompts, 1)
    t.equal(calls[0]!.data.step, 2)
    t.equal(calls[0]!.data.model, 'fake-small', 'llm_call names the model the call went to')
    t.match(stdoutOf(r.events), /^2000022\n/)
    const reqs = llm.requests.slice(before)
    t.equal(reqs.length, 4)
    t.same(
      reqs.map((q) => q.stream),
      [true, true, false, true],
    )
    t.ok(
      reqs.every((q) => q.body.model === 'fake-small'),
      'the allowed per-request model is used, sub-calls included',
    )
    t.ok(
      reqs.every((q) => q.raw.length < 50_000),
      'the context never goes into a prompt',
    )
    t.match(reqs[0]!.messages.at(-1)!.content, /`context`.*a str of 2000022 characters/s)
    t.match(reqs[0]!.messages[0]!.content, /llm_query/)
    const step2prompt = reqs[1]!.messages.at(-1)!.content
    t.match(step2prompt, /Output of step 1 \(truncated to 200 characters\)/)
    t.match(step2prompt, /characters elided/)
    t.ok(step2prompt.length < 1000, 'the step output the model sees is truncated')
    t.match(reqs[3]!.messages.at(-1)!.content, /sub: I read/)
  })

  t.test('answer["ready"] ends a run too', async (t) => {
    llm.script(code('answer["value"] = 6 * 7\nanswer["ready"] = True\n'))
    const r = await postMessage(h.url, sid, { content: 'six sevens', mode: 'agent' })
    t.same(
      ofType(r.events, 'final').map((e) => e.data.value),
      ['42'],
    )
    t.equal(r.events.at(-1)!.data.status, 'ok')
    // the flag stays in the namespace: reset it so later runs start clean
    llm.script(code('answer["ready"] = False\n'))
    await postMessage(h.url, sid, { content: 'reset' })
  })

  t.test('max_steps bounds the loop', async (t) => {
    const before = llm.requests.length
    llm.script(code('print(1)\n'), code('print(2)\n'))
    const r = await postMessage(h.url, sid, { content: 'never finishes', mode: 'agent', max_steps: 2 })
    t.equal(llm.requests.length - before, 2)
    t.equal(ofType(r.events, 'final').length, 0)
    const err = ofType(r.events, 'error')
    t.equal(err.length, 1)
    t.equal(err[0]!.data.ename, 'MaxStepsExceeded')
    t.equal(r.events.at(-1)!.data.status, 'error')
  })

  t.test('the call budget raises LLMError inside the sandbox', async (t) => {
    const before = llm.requests.length
    llm.script(code('try:\n    llm_batch(["a", "b", "c"])\nexcept LLMError as e:\n    print("caught:", e)\nFINAL("done")\n'))
    const r = await postMessage(h.url, sid, { content: 'too many', mode: 'agent', llm_budget: { max_calls: 2 } })
    t.match(stdoutOf(r.events), /caught: LLM call budget exhausted: this turn may send 2 prompts/)
    t.equal(llm.requests.length - before, 1, 'no sub-call reached the model')
    t.same(
      ofType(r.events, 'final').map((e) => e.data.value),
      ['done'],
    )
  })

  t.test('the call budget belongs to the whole turn, not to each step', async (t) => {
    llm.script(
      code('a = llm_query("first")\nprint("got", a)\n'),
      (_req, res) => res.json('A'),
      code('try:\n    llm_query("second")\nexcept LLMError as e:\n    print("caught:", e)\nFINAL("done")\n'),
    )
    const r = await postMessage(h.url, sid, { content: 'two steps', mode: 'agent', llm_budget: { max_calls: 1 } })
    t.match(stdoutOf(r.events), /got A/)
    t.match(stdoutOf(r.events), /caught: LLM call budget exhausted/, "the second step's call is refused")
  })

  t.test('a prompt too large to send raises LLMError at once instead of hanging', async (t) => {
    const before = llm.requests.length
    llm.script(code('try:\n    llm_query("\\u00e9" * 3_000_000)\nexcept LLMError as e:\n    print("caught:", e)\nFINAL("ok")\n'))
    const r = await postMessage(h.url, sid, { content: 'huge', mode: 'agent', timeout_s: 60 })
    t.match(stdoutOf(r.events), /caught: prompt 0 has 3000000 characters/)
    t.equal(r.events.at(-1)!.data.status, 'ok')
    t.equal(llm.requests.length - before, 1, 'nothing but the step reached the model')
  })

  t.test('concurrent messages to one session run one turn at a time', async (t) => {
    llm.script(code('print(1)\n'), code('print(2)\n'), code('print(3)\n'))
    const all = await Promise.all([1, 2, 3].map(() => postMessage(h.url, sid, { content: 'count' })))
    t.same(
      all.map((r) => r.events.at(-1)!.data.status),
      ['ok', 'ok', 'ok'],
    )
    t.same(all.map((r) => stdoutOf(r.events)).sort(), ['1\n', '2\n', '3\n'])
    t.ok(all.filter((r) => r.events[0]!.data.state === 'running').length <= 1, 'at most one started at once')
    // Each turn's span, from its `running` status to its `done`, by log position (ms-seq ids): no overlap.
    const ms = (id: string) => Number(id.split('-')[0])
    const spans = all
      .map((r) => [ms(r.events.filter((e) => e.event === 'status' && e.data.state === 'running')[0]!.id), ms(r.events.at(-1)!.id)] as const)
      .sort((a, b) => a[0] - b[0])
    t.ok(spans[0]![1] <= spans[1]![0] && spans[1]![1] <= spans[2]![0], `turns ran one after another: ${JSON.stringify(spans)}`)
  })

  t.test('concurrency is bounded and batch results keep their order', async (t) => {
    const before = llm.requests.length
    llm.maxInFlight = 0
    llm.script(code('r = llm_batch([f"q{i}" for i in range(6)])\nFINAL(",".join(r))\n'))
    // Sub-calls are answered two at a time, only once two are in flight: more in flight would show.
    const held: Array<() => void> = []
    const pair: Handler = (req, res) => {
      held.push(() => res.json(`a-${req.messages[0]!.content}`))
      if (held.length === 2) for (const f of held.splice(0)) f()
    }
    llm.script(pair, pair, pair, pair, pair, pair)
    const r = await postMessage(h.url, sid, { content: 'batch', mode: 'agent', llm_budget: { max_concurrency: 2 } })
    t.same(
      ofType(r.events, 'final').map((e) => e.data.value),
      ['a-q0,a-q1,a-q2,a-q3,a-q4,a-q5'],
    )
    t.equal(llm.requests.length - before, 7)
    t.equal(llm.maxInFlight, 2, 'never more than max_concurrency sub-calls in flight (plus none for the held step)')
  })

  t.test('the token budget and the per-call timeout', async (t) => {
    const before = llm.requests.length
    llm.script(
      code(
        'out = []\nfor i in range(3):\n    try:\n        out.append(llm_query(f"p{i}"))\n    except LLMError as e:\n        out.append(str(e))\nprint(out)\nFINAL("ok")\n',
      ),
      (_req, res) => res.json('one'),
      (_req, res) => res.json('two'),
    )
    const r = await postMessage(h.url, sid, { content: 'tokens', mode: 'agent', llm_budget: { max_tokens: 20 } })
    t.match(stdoutOf(r.events), /\['one', 'two', 'LLM token budget exhausted: 30 of 20 tokens used in this turn'\]/)
    const subs = llm.requests.slice(before).filter((q) => !q.stream)
    t.equal(subs.length, 2)
    t.equal(subs[1]!.body.max_tokens, 4, 'a call may only use what the budget has left after its prompt (5 left, about 1 for "p1")')

    const never = gate()
    t.teardown(never.open)
    llm.script(code('try:\n    llm_query("slow")\nexcept LLMError as e:\n    print("caught:", e)\nFINAL("ok")\n'), async () => {
      await never.promise
    })
    const slow = await postMessage(h.url, sid, { content: 'slow', mode: 'agent', llm_budget: { timeout_s: 0.5 } })
    t.match(stdoutOf(slow.events), /caught: the model did not answer within 0.5 s/)
    t.equal(slow.events.at(-1)!.data.status, 'ok')
    t.match(codeOf(slow.events), /llm_query\("slow"\)/)
  })
})
