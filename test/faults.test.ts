// Faults: a sandbox that runs out of memory, is killed from outside, or ignores interrupts ends its
// execution with a clear status, never hangs a client, and the session reports dead or restarts on
// request; a Redis restart is survived.
import t, { type Test } from 'tap'
import Docker from 'dockerode'
import { API_KEY, containersOf, startApp } from './helpers/app.js'
import { api, createSession, readSse, stdoutOf, stdoutText, type SseEvent } from './helpers/client.js'
import { executeWithin } from './helpers/neighbour.js'
import { startPrivateRedis } from './helpers/private-redis.js'
import { waitFor } from './helpers/wait.js'

const GRACE_MS = 1000
const LIMITS = { memory_mb: 256, pids: 64, cpus: 0.5 }

/** Opens an execution's SSE stream and returns it as events arrive. */
async function openStream(url: string, path: string, init: RequestInit): Promise<{ events: SseEvent[]; ended: Promise<SseEvent[]>; location: string | null }> {
  const res = await fetch(url + path, {
    ...init,
    headers: { authorization: `Bearer ${API_KEY}`, accept: 'text/event-stream', 'content-type': 'application/json' },
    signal: AbortSignal.timeout(30000),
  })
  const events: SseEvent[] = []
  const ended = readSse(res, (e) => {
    events.push(e)
    return e.event === 'done'
  })
  return { events, ended, location: res.headers.get('location') }
}

t.test('sandbox faults', async (t) => {
  const h = await startApp(t, { INTERRUPT_GRACE_MS: String(GRACE_MS) })
  const sid = await createSession(h.url, { limits: LIMITS })
  const run = (code: string, timeout_s?: number) => executeWithin(h.url, sid, code, { key: API_KEY, timeout_s })
  const status = async () => (await api(h.url, 'GET', `/v1/sessions/${sid}`)).body.status
  const restart = async (t: Test) => {
    const r = await api(h.url, 'POST', `/v1/sessions/${sid}/restart`)
    t.equal(r.status, 200, 'restart on request')
    t.equal(r.body.status, 'ready')
    t.equal(stdoutOf((await run('print("fresh")')).events), 'fresh\n', 'the restarted session runs code')
  }

  t.test('out of memory: done.status oom, session dead, running code refused, restart revives it', async (t) => {
    await run('kept = 1')
    const r = await run('blocks = []\nwhile True:\n    blocks.append(b"x" * (16 << 20))', 30)
    t.equal(r.done?.data.status, 'oom')
    t.ok(await waitFor(async () => (await status()) === 'dead', 30_000), 'the session reports dead')
    const refused = await api(h.url, 'POST', `/v1/sessions/${sid}/executions`, { code: 'print(kept)' })
    t.equal(refused.status, 409)
    t.equal(refused.body.code, 'session_dead')
    await restart(t)
    const gone = await run('print("kept" in globals())')
    t.equal(stdoutOf(gone.events), 'False\n', 'a fresh interpreter')
  })

  t.test('docker kill from outside ends every open stream within a second with a clear error', async (t) => {
    const live = await openStream(h.url, `/v1/sessions/${sid}/executions`, {
      method: 'POST',
      body: JSON.stringify({ code: 'import time\ni = 0\nwhile True:\n    print(i, flush=True); i += 1; time.sleep(0.05)' }),
    })
    t.ok(await waitFor(() => live.events.some((e) => e.event === 'stdout'), 30_000), 'output is streaming')
    // A second client follows the same execution through the GET events stream.
    const follower = await openStream(h.url, `${live.location}/events`, { method: 'GET' })
    t.ok(await waitFor(() => follower.events.some((e) => e.event === 'stdout'), 30_000), 'the follower is streaming')
    const [container] = (await containersOf(h.deployment)).filter((c) => c.Labels['replcast.session'] === sid)
    const killedAt = performance.now()
    await new Docker().getContainer(container!.Id).kill({ signal: 'SIGKILL' })
    const [a, b] = await Promise.all([live.ended, follower.ended])
    for (const [name, events] of [
      ['the executing client', a],
      ['the follower', b],
    ] as const) {
      const done = events.at(-1)
      t.equal(done?.event, 'done', `${name}: the stream ends with done`)
      t.equal(done?.data.status, 'killed', `${name}: done.status killed`)
      t.ok(done && done.at - killedAt < 1000, `${name}: done arrived ${done ? (done.at - killedAt).toFixed(0) : '?'} ms after the kill`)
      const err = events.find((e) => e.event === 'error')
      t.ok(err && /sandbox/i.test(err.data.evalue), `${name}: an error event says the sandbox died (${err?.data.evalue ?? 'none'})`)
    }
    t.ok(await waitFor(async () => (await status()) === 'dead', 30_000), 'the session reports dead')
    await restart(t)
  })

  t.test('a REPL that ignores an interrupt is killed after the grace period', async (t) => {
    const started = openStream(h.url, `/v1/sessions/${sid}/executions`, {
      method: 'POST',
      body: JSON.stringify({
        code: 'import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nprint("armed", flush=True)\nwhile True:\n    time.sleep(0.05)',
      }),
    })
    const s = await started
    t.ok(await waitFor(() => s.events.some((e) => e.event === 'stdout'), 30_000), 'running with SIGINT ignored')
    const sentAt = performance.now()
    t.equal((await api(h.url, 'POST', `/v1/sessions/${sid}/interrupt`)).status, 202)
    const events = await s.ended
    const done = events.at(-1)
    t.equal(done?.data.status, 'killed', 'done.status killed')
    const took = done ? done.at - sentAt : Infinity
    t.ok(took >= GRACE_MS - 50 && took < GRACE_MS + 2000, `ended ${took.toFixed(0)} ms after the interrupt (grace ${GRACE_MS} ms)`)
    t.ok(await waitFor(async () => (await status()) === 'dead', 30_000), 'the session reports dead')
    await restart(t)
  })

  t.test('code stuck in C (no interrupt checks) times out and is killed', async (t) => {
    const r = await run('import re\nre.match(r"(a*)*b", "a" * 64)', 1)
    t.equal(r.done?.data.status, 'timeout')
    t.ok(r.ms < 1000 + GRACE_MS + 3000, `ended after ${r.ms.toFixed(0)} ms`)
    t.ok(await waitFor(async () => (await status()) === 'dead', 30_000), 'the session reports dead')
    await restart(t)
  })
})

t.test("code that writes frames straight onto the REPL's private channel is still capped by the host", async (t) => {
  const h = await startApp(t)
  const sid = await createSession(h.url, { limits: { output_bytes: 100_000 } })
  // Bypasses the REPL's own output cap: frames queued directly on its channel, for the running execution.
  const code = [
    'import gc',
    "ch = next(o for o in gc.get_objects() if type(o).__name__ == 'Channel')",
    "ex = next(o for o in gc.get_objects() if type(o).__name__ == 'Executor').current",
    'for i in range(200):',
    "    ch.send('stream', exec_id=ex.exec_id, name='stdout', text='x' * 50_000)",
    'ch.flush()',
  ].join('\n')
  const r = await api(h.url, 'POST', `/v1/sessions/${sid}/executions`, { code })
  t.equal(r.status, 200)
  const logged = r.body.events.filter((e: any) => e.type === 'stdout').reduce((n: number, e: any) => n + e.text.length, 0)
  t.ok(logged <= 200_000, `the host logged ${logged} of the 10,000,000 bytes sent (budget: twice output_bytes)`)
  const limit = r.body.events.find((e: any) => e.type === 'limit' && e.what === 'event_bytes')
  t.ok(limit && limit.dropped_bytes >= 9_000_000, `a limit event counts what the host dropped (${limit?.dropped_bytes})`)
  t.equal(r.body.events.at(-1).type, 'done')
  const after = await api(h.url, 'POST', `/v1/sessions/${sid}/executions`, { code: 'print(1)' })
  t.equal(stdoutText(after.body.events), '1\n', 'the session still works, with a fresh budget')
})

t.test('Redis restarted: the API reconnects and carries on', async (t) => {
  const redis = await startPrivateRedis()
  t.teardown(() => redis.destroy())
  t.test('with a private redis-server', async (t) => {
    const h = await startApp(t, { REDIS_URL: redis.url })
    const sid = await createSession(h.url, { limits: LIMITS })
    await executeWithin(h.url, sid, 'before = "restart"', { key: API_KEY })

    await redis.stop()
    const down = await api(h.url, 'GET', '/readyz')
    t.equal(down.status, 503, 'readyz says not ready while Redis is down')
    const t0 = performance.now()
    const refused = await api(h.url, 'GET', `/v1/sessions/${sid}`)
    t.equal(refused.status, 503, 'API calls answer 503 while Redis is down')
    t.equal(refused.body.code, 'unavailable')
    t.ok(performance.now() - t0 < 10000, `and promptly (${(performance.now() - t0).toFixed(0)} ms)`)

    await redis.start()
    t.ok(await waitFor(async () => (await api(h.url, 'GET', '/readyz')).status === 200, 20000), 'ready again')
    const r = await executeWithin(h.url, sid, 'print(before)', { key: API_KEY })
    t.equal(stdoutOf(r.events), 'restart\n', 'the session and its state carried on (SSE)')
    const json = await api(h.url, 'POST', `/v1/sessions/${sid}/executions`, { code: 'print(2)' })
    t.equal(json.body.status, 'ok', 'JSON executions work')
    const sid2 = await createSession(h.url, { limits: LIMITS })
    t.equal(stdoutOf((await executeWithin(h.url, sid2, 'print(3)', { key: API_KEY })).events), '3\n', 'new sessions work')
  })
})
