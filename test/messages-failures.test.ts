// Failure and bad input: no LLM configured, model HTTP errors, a silent model, a stream cut
// halfway or sending malformed chunks, interrupts, a turn timeout, a client that leaves.
// Every turn ends with an error event and exactly one done; the session stays usable.
import t, { type Test } from 'tap'
import { startApp, API_KEY } from './helpers/app.js'
import { api, createSession, executeSse, readSse, stdoutOf, type SseEvent } from './helpers/client.js'
import { gate, ofType, postMessage, startFakeLlm } from './helpers/fake-llm.js'

async function stillUsable(t: Test, url: string, sid: string): Promise<void> {
  const r = await executeSse(url, sid, 'print("alive")')
  t.equal(stdoutOf(r.events), 'alive\n', 'the session still runs code')
}

function endsOnce(t: Test, events: SseEvent[], status: string): void {
  t.equal(ofType(events, 'done').length, 1, 'exactly one done')
  t.equal(events.at(-1)!.event, 'done')
  t.equal(events.at(-1)!.data.status, status)
}

async function resume(url: string, location: string): Promise<SseEvent[]> {
  const res = await fetch(`${url}${location}/events`, { headers: { authorization: `Bearer ${API_KEY}`, accept: 'text/event-stream' } })
  return readSse(res)
}

t.test('without an LLM endpoint', async (t) => {
  const h = await startApp(t)
  const sid = await createSession(h.url)
  const r = await api(h.url, 'POST', `/v1/sessions/${sid}/messages`, { content: 'hello' })
  t.equal(r.status, 503)
  t.equal(r.body.code, 'llm_not_configured')
  t.match(r.headers.get('content-type'), /application\/problem\+json/)
  const ex = await executeSse(h.url, sid, 'try:\n    llm_query("hi")\nexcept LLMError as e:\n    print("LLMError:", e)\nprint(1 + 1)')
  t.match(stdoutOf(ex.events), /LLMError: no LLM is configured/)
  t.match(stdoutOf(ex.events), /2\n$/, 'code execution keeps working')
})

t.test('model failures', async (t) => {
  const llm = await startFakeLlm()
  t.teardown(() => llm.close())
  const h = await startApp(t, { OPENAI_BASE_URL: llm.baseURL })
  const sid = await createSession(h.url)

  t.test("a plain execution's llm_query is abandoned at the model when the execution ends", async (t) => {
    const never = gate()
    t.teardown(never.open)
    let abandon!: () => void
    const abandoned = new Promise<void>((r) => {
      abandon = r
    })
    llm.script(async (_req, res) => {
      res.raw.on('close', () => abandon())
      await never.promise
    })
    const r = await executeSse(h.url, sid, 'llm_query("hold on")', { timeout_s: 1 })
    t.equal(r.events.at(-1)?.data.status, 'timeout')
    const closed = await Promise.race([abandoned.then(() => true), new Promise<boolean>((res) => setTimeout(() => res(false), 10_000).unref())])
    t.ok(closed, 'the request to the model was closed')
    await stillUsable(t, h.url, sid)
  })

  t.test('an HTTP error from the model', async (t) => {
    llm.script((_req, res) => res.fail(500, 'upstream exploded'))
    const r = await postMessage(h.url, sid, { content: 'x' })
    const err = ofType(r.events, 'error')
    t.equal(err.length, 1)
    t.equal(err[0]!.data.ename, 'LLMError')
    t.match(err[0]!.data.evalue, /HTTP 500.*upstream exploded/)
    endsOnce(t, r.events, 'error')
    await stillUsable(t, h.url, sid)
  })

  t.test('a model that goes silent', async (t) => {
    const never = gate()
    t.teardown(never.open)
    let closed = false
    llm.script(async (_req, res) => {
      res.raw.on('close', () => {
        closed = true
      })
      res.token('print("partial")\nprint("unfin')
      await never.promise
    })
    const t0 = performance.now()
    const r = await postMessage(h.url, sid, { content: 'x', model_timeout_s: 0.5 })
    t.ok(performance.now() - t0 < 10_000, 'nothing hangs')
    t.equal(stdoutOf(r.events), 'partial\n', 'complete statements ran')
    const err = ofType(r.events, 'error')
    t.equal(err.length, 1, 'the unfinished statement did not run (no SyntaxError)')
    t.match(err[0]!.data.evalue, /sent nothing for 0.5 s/)
    endsOnce(t, r.events, 'error')
    t.ok(closed, 'the model request was aborted')
    await stillUsable(t, h.url, sid)
  })

  t.test('a stream cut halfway', async (t) => {
    llm.script((_req, res) => {
      res.token('print("one")\n')
      res.token('print("tw')
      void res.cut()
    })
    const r = await postMessage(h.url, sid, { content: 'x' })
    t.equal(stdoutOf(r.events), 'one\n')
    const err = ofType(r.events, 'error')
    t.same(
      err.map((e) => e.data.ename),
      ['LLMError'],
    )
    endsOnce(t, r.events, 'error')
    await stillUsable(t, h.url, sid)
  })

  t.test('a stream that ends without finishing the reply', async (t) => {
    llm.script((_req, res) => {
      res.token('print("one")\n')
      res.token('x = (')
      res.raw.end()
    })
    const r = await postMessage(h.url, sid, { content: 'x' })
    t.equal(stdoutOf(r.events), 'one\n')
    t.match(
      ofType(r.events, 'error').map((e) => e.data.evalue),
      [/ended before the reply was complete/],
    )
    endsOnce(t, r.events, 'error')
  })

  t.test('malformed chunks', async (t) => {
    llm.script((_req, res) => {
      res.token('print("ok")\n')
      res.data('{"choices": [ broken')
      res.end()
    })
    const r = await postMessage(h.url, sid, { content: 'x' })
    const err = ofType(r.events, 'error')
    t.equal(err.length, 1)
    t.equal(err[0]!.data.ename, 'LLMError')
    t.match(err[0]!.data.evalue, /malformed/)
    endsOnce(t, r.events, 'error')
    await stillUsable(t, h.url, sid)
  })

  t.test('a turn can be interrupted like an execution', async (t) => {
    const never = gate()
    t.teardown(never.open)
    let closed = false
    llm.script(async (_req, res) => {
      res.raw.on('close', () => {
        closed = true
      })
      res.token('import time\nprint("start")\ntime.sleep(60)\nprint("late")\n')
      await never.promise
    })
    // Assigned in the callback below: the assertion keeps TS from narrowing it to `null` for good.
    let interrupted = null as Promise<unknown> | null
    const r = await postMessage(
      h.url,
      sid,
      { content: 'x' },
      {
        until: (e) => {
          if (e.event === 'stdout' && !interrupted) interrupted = api(h.url, 'POST', `/v1/sessions/${sid}/interrupt`)
          return e.event === 'done'
        },
      },
    )
    const ir = (await interrupted) as { status: number }
    t.ok(ir.status < 300, `interrupt answered ${ir.status}`)
    t.equal(stdoutOf(r.events), 'start\n')
    t.same(
      ofType(r.events, 'error').map((e) => e.data.ename),
      ['KeyboardInterrupt'],
    )
    endsOnce(t, r.events, 'interrupted')
    t.ok(closed, 'the model stream was abandoned')
    await stillUsable(t, h.url, sid)
  })

  t.test('the turn timeout', async (t) => {
    const never = gate()
    t.teardown(never.open)
    llm.script(async (_req, res) => {
      res.token('print("waiting")\n')
      await never.promise
    })
    const r = await postMessage(h.url, sid, { content: 'x', timeout_s: 1 })
    endsOnce(t, r.events, 'timeout')
    await stillUsable(t, h.url, sid)
  })

  t.test('a client that disconnects: the turn goes on and can be resumed', async (t) => {
    const rest = gate()
    llm.script(async (_req, res) => {
      res.token('print("first")\nx = ')
      await rest.promise
      res.stream(['2\nprint("second", x)\n'])
    })
    const ac = new AbortController()
    const first = await postMessage(h.url, sid, { content: 'x' }, { signal: ac.signal, until: (e) => e.event === 'stdout' })
    ac.abort()
    rest.open()
    t.ok(first.location)
    const all = await resume(h.url, first.location!)
    t.equal(stdoutOf(all), 'first\nsecond 2\n')
    endsOnce(t, all, 'ok')
  })

  t.test('on_disconnect: cancel ends the turn with an error and one done', async (t) => {
    const never = gate()
    t.teardown(never.open)
    llm.script(async (_req, res) => {
      res.token('import time\nprint("first")\ntime.sleep(60)\n')
      await never.promise
    })
    const ac = new AbortController()
    const first = await postMessage(h.url, sid, { content: 'x', on_disconnect: 'cancel' }, { signal: ac.signal, until: (e) => e.event === 'stdout' })
    ac.abort()
    const all = await resume(h.url, first.location!)
    t.same(
      ofType(all, 'error').map((e) => e.data.ename),
      ['KeyboardInterrupt', 'TurnCancelled'],
    )
    endsOnce(t, all, 'interrupted')
    await stillUsable(t, h.url, sid)
  })
})
