// Stream mode against a scripted OpenAI-compatible server: statements run while the model is
// still writing, sleeps keep their gaps, fences and prose do not break the run, history and
// the namespace carry over between turns.
import t from 'tap'
import { startApp } from './helpers/app.js'
import { api, createSession, readSse, stdoutOf, stdoutText } from './helpers/client.js'
import { codeOf, gate, ofType, postMessage, startFakeLlm, tokens } from './helpers/fake-llm.js'

t.test('stream mode', async (t) => {
  const llm = await startFakeLlm()
  t.teardown(() => llm.close())
  const h = await startApp(t, { OPENAI_BASE_URL: llm.baseURL, OPENAI_API_KEY: 'sk-test-0000', REPLCAST_MODEL: 'fake-coder' })
  const sid = await createSession(h.url)

  t.test("the first statement's output reaches the client while the model is still streaming", async (t) => {
    const rest = gate()
    let modelFinished = false
    llm.script(async (_req, res) => {
      res.token('print("first")\n')
      res.token('x = ') // a statement begun, its rest held until the client has seen the first output
      await rest.promise // held until the client has seen the first output
      for (const tok of tokens('41 + 1\nprint("second", x)\n')) res.token(tok)
      res.end()
      modelFinished = true
    })
    // A safety valve so a broken implementation fails instead of hanging.
    const valve = setTimeout(() => rest.open(), 20_000)
    let finishedWhenFirstSeen: boolean | null = null
    const r = await postMessage(
      h.url,
      sid,
      { content: 'say first, then second' },
      {
        until: (e) => {
          if (e.event === 'stdout' && e.data.text.includes('first') && finishedWhenFirstSeen === null) {
            finishedWhenFirstSeen = modelFinished
            rest.open()
          }
          return e.event === 'done'
        },
      },
    )
    clearTimeout(valve)
    t.equal(r.status, 200)
    t.match(r.location, /^\/v1\/sessions\/ses_\w+\/executions\/exe_\w+$/)
    t.equal(finishedWhenFirstSeen, false, 'first output arrived before the model finished its stream')
    t.equal(stdoutOf(r.events), 'first\nsecond 42\n')
    t.equal(codeOf(r.events), 'print("first")\nx = 41 + 1\nprint("second", x)\n')
    const kinds = r.events.map((e) => e.event)
    t.equal(kinds[0], 'status')
    t.equal(kinds.filter((k) => k === 'done').length, 1)
    t.equal(kinds[kinds.length - 1], 'done')
    t.equal(r.events.at(-1)!.data.status, 'ok')
    // True order: the code of the second statement streams after the first statement's output.
    const firstOut = r.events.findIndex((e) => e.event === 'stdout' && e.data.text.includes('first'))
    const laterCode = r.events.findIndex((e) => e.event === 'code' && e.data.delta.includes('41'))
    t.ok(firstOut > 0 && laterCode > firstOut, 'code and output interleave in true order')
    t.ok(r.events.filter((e) => e.event === 'code').every((e) => e.data.step === 1))
    const req = llm.requests.at(-1)!
    t.equal(req.body.model, 'fake-coder')
    t.equal(req.stream, true)
    t.equal(req.messages[0]!.role, 'system')
    t.match(req.messages[0]!.content, /print\(\)/)
    t.match(req.messages[0]!.content, /time\.sleep/)
    t.equal(req.messages.at(-1)!.content, 'say first, then second')
  })

  t.test('a statement runs at its newline: the model pausing after it does not hold its output back', async (t) => {
    const rest = gate()
    let valveOpened = false
    llm.script(async (_req, res) => {
      res.token("print('one')\n")
      await rest.promise // the model pauses here until the client has `one`
      res.token("print('two')\n")
      res.end()
    })
    // A safety valve so a broken implementation fails instead of hanging.
    const valve = setTimeout(() => {
      valveOpened = true
      rest.open()
    }, 20_000)
    const r = await postMessage(
      h.url,
      sid,
      { content: 'say one, then two' },
      {
        until: (e) => {
          if (e.event === 'stdout' && e.data.text.includes('one')) rest.open()
          return e.event === 'done'
        },
      },
    )
    clearTimeout(valve)
    t.notOk(valveOpened, '`one` reached the client while the model held its stream')
    t.equal(stdoutOf(r.events), 'one\ntwo\n')
    t.equal(codeOf(r.events), "print('one')\nprint('two')\n")
    const one = r.events.findIndex((e) => e.event === 'stdout' && e.data.text.includes('one'))
    const two = r.events.findIndex((e) => e.event === 'code' && e.data.delta.includes('two'))
    t.ok(one > 0 && two > one, 'the second line was streamed after the output of the first')
    t.equal(r.events.at(-1)!.data.status, 'ok')
  })

  t.test('sleep between prints reaches the client as a gap', async (t) => {
    llm.script((_req, res) => res.stream(tokens('import time\nprint("a")\ntime.sleep(1)\nprint("b")\n', 6)))
    const r = await postMessage(h.url, sid, { content: 'pause' })
    const outs = ofType(r.events, 'stdout')
    t.equal(stdoutOf(r.events), 'a\nb\n')
    const a = outs.find((e) => e.data.text.includes('a'))!
    const b = outs.find((e) => e.data.text.includes('b'))!
    const gap = b.at - a.at
    t.ok(gap >= 900, `gap between a and b is ${Math.round(gap)} ms`)
    t.equal(r.events.at(-1)!.data.status, 'ok')
  })

  t.test('markdown fences and prose lines do not break the run', async (t) => {
    const reply = "Sure! Here's the code:\n```python\nimport math\nprint(math.factorial(20))\n```\nThis prints 20 factorial.\n"
    llm.script((_req, res) => res.stream(tokens(reply, 5)))
    const r = await postMessage(h.url, sid, { content: '20!' })
    t.equal(stdoutOf(r.events), '2432902008176640000\n')
    t.same(ofType(r.events, 'error'), [], 'no SyntaxError from the prose')
    t.equal(codeOf(r.events), 'import math\nprint(math.factorial(20))\n', 'only code is shown as code')
    t.equal(r.events.at(-1)!.data.status, 'ok')
  })

  t.test('the namespace and the history carry state between turns', async (t) => {
    const s2 = await createSession(h.url)
    llm.script((_req, res) => res.stream(['secret = 41\n', 'print("stored")\n']))
    const first = await postMessage(h.url, s2, { content: 'remember 41' })
    t.equal(stdoutOf(first.events), 'stored\n')
    llm.script((_req, res) => res.stream(['print(secret + 1)\n']))
    const second = await postMessage(h.url, s2, { content: 'add one' })
    t.equal(stdoutOf(second.events), '42\n', 'variables survive between turns')
    const prompt = llm.requests.at(-1)!.messages
    t.same(
      prompt.map((m) => m.role),
      ['system', 'user', 'assistant', 'user'],
    )
    t.equal(prompt[1]!.content, 'remember 41')
    t.equal(prompt[2]!.content, 'secret = 41\nprint("stored")\n')
    t.match(prompt[3]!.content, /Output:\nstored/, 'the previous output is included')
    t.match(prompt[3]!.content, /add one$/)

    const hist = await api(h.url, 'GET', `/v1/sessions/${s2}/messages`)
    t.equal(hist.status, 200)
    t.same(
      hist.body.messages.map((m: any) => m.role),
      ['user', 'assistant', 'user', 'assistant'],
    )
    t.match(hist.body.messages[1], { content: 'secret = 41\nprint("stored")\n', output: 'stored\n', status: 'ok', mode: 'stream' })
    t.equal(hist.body.messages[3].output, '42\n')
    t.equal(hist.body.messages[1].turn_id, first.location!.split('/').at(-1))

    // max_history_length bounds what goes to the model; include_outputs=false leaves outputs out.
    llm.script((_req, res) => res.stream(['print(1)\n']))
    await postMessage(h.url, s2, { content: 'short memory', max_history_length: 2, include_outputs: false })
    const bounded = llm.requests.at(-1)!.messages
    t.same(
      bounded.map((m) => m.role),
      ['system', 'user', 'assistant', 'user'],
    )
    t.equal(bounded[1]!.content, 'add one')
    t.notMatch(bounded[3]!.content, /Output:/)

    const other = await api(h.url, 'GET', `/v1/sessions/${s2}/messages`, undefined, { key: 'test-key-beta-0002' })
    t.equal(other.status, 404, 'another tenant cannot read the history')
  })

  t.test("JSON answer, Location, and resuming the turn's events", async (t) => {
    llm.script((_req, res) => res.stream(['print(6 * 7)\n']))
    const r = await api(h.url, 'POST', `/v1/sessions/${sid}/messages`, { content: 'six times seven' })
    t.equal(r.status, 200)
    t.equal(r.body.status, 'ok')
    const types = r.body.events.map((e: any) => e.type)
    t.same(
      types.filter((x: string) => x !== 'code'),
      ['status', 'stdout', 'done'],
    )
    t.equal(stdoutText(r.body.events), '42\n')
    t.equal(r.body.events.find((e: any) => e.type === 'code').step, 1)
    const loc = r.headers.get('location')!
    t.equal(loc, `/v1/sessions/${sid}/executions/${r.body.id}`)
    const first = r.body.events[0].id
    const res = await fetch(`${h.url}${loc}/events?after=${first}`, { headers: { authorization: 'Bearer test-key-alpha-0001', accept: 'text/event-stream' } })
    const replay = await readSse(res)
    t.same(
      replay.map((e) => e.event),
      types.slice(1),
      'replay after the first event gives the rest, none twice',
    )
    const end = await fetch(`${h.url}${loc}/events?after=${r.body.events.at(-1).id}`, {
      headers: { authorization: 'Bearer test-key-alpha-0001', accept: 'text/event-stream' },
    })
    t.equal(end.status, 204)
  })

  t.test('bad input is refused with a stable code', async (t) => {
    const bad = await api(h.url, 'POST', `/v1/sessions/${sid}/messages`, { content: 'x', mode: 'chat' })
    t.equal(bad.status, 400)
    t.equal(bad.body.code, 'validation_failed')
    const ctx = await api(h.url, 'POST', `/v1/sessions/${sid}/messages`, { content: 'x', context: 'data' })
    t.equal(ctx.status, 400, 'context needs agent mode')
    const model = await api(h.url, 'POST', `/v1/sessions/${sid}/messages`, { content: 'x', model: 'gpt-unlisted' })
    t.equal(model.status, 400)
    t.equal(model.body.code, 'model_not_allowed')
    const missing = await api(h.url, 'POST', '/v1/sessions/ses_00000000000000000000/messages', { content: 'x' })
    t.equal(missing.status, 404)
    t.equal(missing.body.code, 'session_not_found')
  })
})
