// Running code in a session: live streaming, state, rich outputs, errors, queueing, timeouts, interrupts.
import t from 'tap'
import { startApp } from './helpers/app.js'
import { api, createSession, executeSse, stdoutOf } from './helpers/client.js'
import { waitFor } from './helpers/wait.js'

t.test('executions', async (t) => {
  const h = await startApp(t, { EXEC_QUEUE_DEPTH: '2', INTERRUPT_GRACE_MS: '1500' })
  const sid = await createSession(h.url)

  t.test('sleep between prints reaches the client as a gap', async (t) => {
    const r = await executeSse(h.url, sid, "import time\nprint('a', flush=True)\ntime.sleep(1)\nprint('b')")
    const outs = r.events.filter((e) => e.event === 'stdout')
    t.equal(outs.map((e) => e.data.text).join(''), 'a\nb\n')
    const a = outs.find((e) => e.data.text.includes('a'))!
    const b = outs.find((e) => e.data.text.includes('b'))!
    t.ok(b.at - a.at >= 800, `b arrived ${Math.round(b.at - a.at)} ms after a (slept 1000 ms)`)
    t.equal(r.events[0]?.event, 'status', 'first event is status')
    t.equal(r.events.at(-1)?.event, 'done', 'last event is done')
    t.equal(r.events.filter((e) => e.event === 'done').length, 1, 'exactly one done')
  })

  t.test('variables persist across executions', async (t) => {
    await executeSse(h.url, sid, 'counter = 41')
    const r = await executeSse(h.url, sid, 'counter += 1\nprint(counter)')
    t.equal(stdoutOf(r.events), '42\n')
  })

  t.test('result, display and error events carry the documented payloads', async (t) => {
    const res = await executeSse(h.url, sid, '6 * 7')
    const result = res.events.find((e) => e.event === 'result')
    t.equal(result?.data.data['text/plain'], '42')
    t.type(result?.data.execution_count, 'number')

    const html = await executeSse(h.url, sid, 'import pandas as pd\npd.DataFrame({"x": [1, 2]})')
    const df = html.events.find((e) => e.event === 'result')
    t.match(df?.data.data['text/html'], /<table/, 'DataFrame result has text/html')

    const fig = await executeSse(h.url, sid, 'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()')
    const display = fig.events.find((e) => e.event === 'display')
    t.ok(display, 'a figure becomes a display event')
    const png = Buffer.from(display!.data.data['image/png'], 'base64')
    t.same([...png.subarray(1, 4)], [...Buffer.from('PNG')], 'image/png is a base64 PNG')

    const ipy = await executeSse(h.url, sid, 'from IPython.display import display, HTML, Markdown\ndisplay(HTML("<b>bold</b>"), Markdown("# title"))')
    const shown = ipy.events.filter((e) => e.event === 'display').map((e) => e.data.data)
    t.equal(shown[0]?.['text/html'], '<b>bold</b>', 'IPython.display works in notebook-style code')
    t.equal(shown[1]?.['text/markdown'], '# title')

    const err = await executeSse(h.url, sid, 'def f():\n    return 1 / 0\nf()')
    const e = err.events.find((x) => x.event === 'error')
    t.equal(e?.data.ename, 'ZeroDivisionError')
    t.match(e?.data.evalue, /division by zero/)
    t.ok(
      e?.data.traceback.some((l: string) => l.includes('return 1 / 0')),
      'traceback shows the user source line',
    )
    t.equal(err.events.at(-1)?.data.status, 'error')
  })

  t.test('JSON clients get the whole execution and a Location header', async (t) => {
    const r = await api(h.url, 'POST', `/v1/sessions/${sid}/executions`, { code: 'print("hi")\n1+1' })
    t.equal(r.status, 200)
    t.equal(r.body.status, 'ok')
    t.match(r.headers.get('location'), new RegExp(`^/v1/sessions/${sid}/executions/exe_`))
    t.same(
      r.body.events.map((e: any) => e.type),
      ['status', 'stdout', 'result', 'done'],
    )
    t.ok(
      r.body.events.every((e: any) => typeof e.id === 'string' && e.id.length > 0),
      'every event has an id',
    )
    const again = await api(h.url, 'GET', r.headers.get('location')!)
    t.same(again.body.events, r.body.events, 'GET returns the same events')
  })

  t.test('executions queue in order; beyond the depth a 409', async (t) => {
    const executionsKey = `${h.prefix}{${sid}}:executions`
    const before = await h.redis.llen(executionsKey)
    const first = executeSse(h.url, sid, 'import time\ntime.sleep(1.5)\nprint(1)')
    // wait until the first one is running before queueing more
    const runningSeen = await waitFor(async () => (await api(h.url, 'GET', `/v1/sessions/${sid}`)).body.status === 'busy')
    t.ok(runningSeen, 'session reports busy')
    const second = executeSse(h.url, sid, 'print(2)')
    const third = executeSse(h.url, sid, 'print(3)')
    // all three are accepted once the session's execution list grew by three
    t.ok(await waitFor(async () => (await h.redis.llen(executionsKey)) >= before + 3), 'three accepted')
    const fourth = await api(h.url, 'POST', `/v1/sessions/${sid}/executions`, { code: 'print(4)' })
    t.equal(fourth.status, 409)
    t.equal(fourth.body.code, 'queue_full')
    const [a, b, c] = await Promise.all([first, second, third])
    t.equal(stdoutOf(a.events), '1\n')
    t.equal(b.events[0]?.data.state, 'queued', 'second waited in the queue')
    t.equal(stdoutOf(b.events), '2\n')
    t.equal(stdoutOf(c.events), '3\n')
    t.ok(b.events.at(-1)!.at <= c.events.at(-1)!.at, 'they ended in order')
  })

  t.test('concurrent submits to an idle session: one runs, the others say queued, all in order', async (t) => {
    const all = await Promise.all([1, 2, 3].map((n) => api(h.url, 'POST', `/v1/sessions/${sid}/executions`, { code: `print(${n})` })))
    const first = all.map((r) => r.body.events[0].state)
    t.same([...first].sort(), ['queued', 'queued', 'running'], `first status events: ${first.join(', ')}`)
    t.same(
      all.map((r) => r.body.status),
      ['ok', 'ok', 'ok'],
    )
  })

  t.test('a timeout interrupts the code and the session stays usable with its state', async (t) => {
    await executeSse(h.url, sid, 'kept = "still here"')
    const r = await executeSse(h.url, sid, 'import time\nwhile True: time.sleep(0.1)', { timeout_s: 1 })
    t.equal(r.events.at(-1)?.data.status, 'timeout')
    const after = await executeSse(h.url, sid, 'print(kept)')
    t.equal(stdoutOf(after.events), 'still here\n')
  })

  t.test('interrupt raises KeyboardInterrupt and keeps state', async (t) => {
    await executeSse(h.url, sid, 'x = 123')
    const run = executeSse(h.url, sid, 'import time\nprint("start", flush=True)\ntime.sleep(60)', { until: (e) => e.event === 'done' })
    await waitFor(async () => (await api(h.url, 'GET', `/v1/sessions/${sid}`)).body.status === 'busy')
    const intr = await api(h.url, 'POST', `/v1/sessions/${sid}/interrupt`)
    t.equal(intr.status, 202)
    const r = await run
    t.equal(r.events.at(-1)?.data.status, 'interrupted')
    t.equal(r.events.find((e) => e.event === 'error')?.data.ename, 'KeyboardInterrupt')
    const after = await executeSse(h.url, sid, 'print(x)')
    t.equal(stdoutOf(after.events), '123\n')
    const none = await api(h.url, 'POST', `/v1/sessions/${sid}/interrupt`)
    t.equal(none.status, 409)
    t.equal(none.body.code, 'nothing_running')
  })

  t.test('code that ignores interrupts is killed: done killed, session dead, restart revives it', async (t) => {
    const r = await executeSse(h.url, sid, 'import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: time.sleep(0.05)', { timeout_s: 1 })
    t.equal(r.events.at(-1)?.data.status, 'timeout', 'timeout reported even though the sandbox had to be killed')
    const s = await waitFor(async () => (await api(h.url, 'GET', `/v1/sessions/${sid}`)).body.status === 'dead')
    t.ok(s, 'session reports dead')
    const refused = await api(h.url, 'POST', `/v1/sessions/${sid}/executions`, { code: '1' })
    t.equal(refused.status, 409)
    t.equal(refused.body.code, 'session_dead')
    const restarted = await api(h.url, 'POST', `/v1/sessions/${sid}/restart`)
    t.equal(restarted.status, 200)
    t.equal(restarted.body.status, 'ready')
    const ok = await executeSse(h.url, sid, 'print("back")')
    t.equal(stdoutOf(ok.events), 'back\n')
  })
})
