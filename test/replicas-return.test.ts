// An instance that comes back: the holder of a session is SIGKILLed (and started again with the same
// instance id) or paused (SIGSTOP, as a long GC would) while an execution prints, and a survivor
// takes the session over. However the two meet, one instance relays the sandbox's output: a client
// resuming with Last-Event-ID through the returned instance gets every later event once (no id twice,
// the output exactly as the code printed it, one `done`), and the log in Redis holds each line once.
import t, { type Test } from 'tap'
import { API_KEY, containersOf } from './helpers/app.js'
import { api, createSession, readSse, stdoutOf, stdoutText, type SseEvent } from './helpers/client.js'
import { metricValue } from './helpers/metrics.js'
import { startReplicas, type Replicas } from './helpers/replicas.js'
import { waitFor } from './helpers/wait.js'

const auth = { authorization: `Bearer ${API_KEY}` }
const printing = (lines: number) => `import time\nfor i in range(${lines}):\n    print(f"tick {i}", flush=True)\n    time.sleep(0.25)\nprint("end", flush=True)`
const printed = (lines: number) => Array.from({ length: lines }, (_, i) => `tick ${i}\n`).join('') + 'end\n'

/** Starts the code through `base` as SSE and reads up to its second line; returns its id and the events so far. */
async function startPrinting(base: string, sid: string, code: string): Promise<{ eid: string; before: SseEvent[] }> {
  const res = await fetch(`${base}/v1/sessions/${sid}/executions`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({ code, timeout_s: 120 }),
  })
  let seen = 0
  const before = await readSse(res, (e) => e.event === 'stdout' && ++seen === 2)
  return { eid: res.headers.get('location')!.split('/').pop()!, before }
}

/** Follows an execution through `base` from `after` to its done, resuming with Last-Event-ID whenever a stream ends early. */
async function follow(base: string, sid: string, eid: string, after: string, deadlineMs: number): Promise<SseEvent[]> {
  const out: SseEvent[] = []
  const end = performance.now() + deadlineMs
  while (performance.now() < end && out.at(-1)?.event !== 'done') {
    const last = out.filter((e) => e.id).at(-1)?.id ?? after
    try {
      const res = await fetch(`${base}/v1/sessions/${sid}/executions/${eid}/events`, {
        headers: { ...auth, accept: 'text/event-stream', 'last-event-id': last },
        signal: AbortSignal.timeout(Math.max(1, Math.ceil(end - performance.now()))),
      })
      if (res.status === 204) break
      out.push(...(await readSse(res, (e) => e.event === 'done')).filter((e) => e.event !== 'shutdown'))
    } catch {
      /* the stream was cut, or the deadline passed: resume (or stop) */
    }
  }
  return out
}

/** How many lines of the execution Redis holds. */
async function storedLines(base: string, sid: string, eid: string): Promise<number> {
  const events = (await api(base, 'GET', `/v1/sessions/${sid}/executions/${eid}`)).body.events as Array<{ type: string; text?: string }>
  return stdoutText(events).split('\n').length - 1
}

/** One execution's events, as the resuming client saw them and as Redis holds them: each once. */
async function assertOnce(t: Test, base: string, sid: string, eid: string, seen: SseEvent[], expected: string): Promise<void> {
  const ids = seen.map((e) => e.id)
  t.same(
    ids.filter((id, i) => ids.indexOf(id) !== i),
    [],
    'no event id twice across the resume',
  )
  t.equal(stdoutOf(seen), expected, 'the output exactly as the code printed it')
  t.equal(seen.filter((e) => e.event === 'done').length, 1, 'one done')
  t.equal(seen.at(-1)?.data.status, 'ok')
  const stored = (await api(base, 'GET', `/v1/sessions/${sid}/executions/${eid}`)).body.events as Array<{ id: string; type: string; text?: string }>
  t.equal(stdoutText(stored), expected, 'the log in Redis holds every line once')
  t.equal(stored.filter((e) => e.type === 'done').length, 1, 'and one done')
  t.same(
    stored.map((e) => e.id),
    ids,
    'the client saw every stored event, under its stored id',
  )
}

/** The session is whole and usable through the returned instance (routed to its holder), then deleted. */
async function assertUsable(t: Test, r: Replicas, base: string, sid: string): Promise<void> {
  const next = await api(base, 'POST', `/v1/sessions/${sid}/executions`, { code: 'print(x + 1)' })
  t.equal(stdoutText(next.body.events), '42\n', 'the namespace is whole')
  t.equal((await api(base, 'DELETE', `/v1/sessions/${sid}`)).status, 204)
  t.ok(await waitFor(async () => (await containersOf(r.deployment)).length === 0, 30_000), 'no container left')
}

t.test('an instance SIGKILLed and started again leaves the session the survivor took over', async (t) => {
  const r = await startReplicas(t, 2, { LEASE_TTL_MS: '3000', REAPER_INTERVAL_MS: '500', INSTANCE_HEARTBEAT_MS: '500' })
  const [a] = r.servers.map((s) => s.url) as [string, string]
  const sid = await createSession(a)
  await api(a, 'POST', `/v1/sessions/${sid}/executions`, { code: 'x = 41' })
  const lines = 24
  const { eid, before } = await startPrinting(a, sid, printing(lines))
  await r.stop(0, 'SIGKILL')
  t.ok(await waitFor(async () => (await r.holderOf(sid)) === 1, 15000), 'the survivor took the session over')
  await r.restart(0)
  const after = await follow(a, sid, eid, before.at(-1)!.id, 30000)
  await assertOnce(t, a, sid, eid, [...before, ...after], printed(lines))
  t.equal(await r.holderOf(sid), 1, 'the survivor still holds the session')
  t.equal(await metricValue(a, 'replcast_sessions_attached'), 0, 'the returned instance did not attach to it')
  await assertUsable(t, r, a, sid)
})

t.test('a survivor that takes over from an instance just back: the returned instance stops relaying at once', async (t) => {
  // Heartbeats live 18 s: the killed instance is back, with its sessions re-adopted, before the
  // survivor finds it gone. Then it misses one beat (the test removes its heartbeat, as a pass of the
  // survivor that began before the instance came back saw it): the survivor takes the session over
  // while the returned instance relays it.
  const r = await startReplicas(t, 2, { LEASE_TTL_MS: '20000', REAPER_INTERVAL_MS: '500', INSTANCE_HEARTBEAT_MS: '6000' })
  const [a] = r.servers.map((s) => s.url) as [string, string]
  const sid = await createSession(a)
  await api(a, 'POST', `/v1/sessions/${sid}/executions`, { code: 'x = 41' })
  const lines = 60
  const { eid, before } = await startPrinting(a, sid, printing(lines))
  await r.stop(0, 'SIGKILL')
  await r.restart(0)
  t.equal(await r.holderOf(sid), 0, 'back, the instance re-adopted its session')
  const relayed = await storedLines(a, sid, eid)
  t.ok(await waitFor(async () => (await storedLines(a, sid, eid)) > relayed, 30_000), 'and relays it')
  await r.redis.del(`${r.prefix}instance:${r.ids[0]}:heartbeat`)
  t.ok(await waitFor(async () => (await r.holderOf(sid)) === 1, 30_000), 'the survivor took the session over')
  t.ok(await waitFor(async () => (await metricValue(a, 'replcast_sessions_attached')) === 0, 30_000), 'the returned instance let it go')
  const after = await follow(a, sid, eid, before.at(-1)!.id, 40000)
  await assertOnce(t, a, sid, eid, [...before, ...after], printed(lines))
  t.equal(await r.holderOf(sid), 1, 'the survivor still holds the session')
  await assertUsable(t, r, a, sid)
})

t.test('an instance paused past its heartbeat writes nothing more for the session the survivor took over', async (t) => {
  const r = await startReplicas(t, 2, { LEASE_TTL_MS: '3000', REAPER_INTERVAL_MS: '500', INSTANCE_HEARTBEAT_MS: '500' })
  const [a, b] = r.servers.map((s) => s.url) as [string, string]
  const sid = await createSession(a)
  await api(a, 'POST', `/v1/sessions/${sid}/executions`, { code: 'x = 41' })
  const lines = 24
  const { eid, before } = await startPrinting(a, sid, printing(lines))
  r.servers[0]!.child.kill('SIGSTOP')
  t.ok(await waitFor(async () => (await r.holderOf(sid)) === 1, 15000), 'the survivor took the session over')
  // The sandbox's output meanwhile waits on the paused instance's attach stream too.
  t.ok(await waitFor(async () => (await storedLines(b, sid, eid)) >= 6, 15000), 'the survivor relays it')
  r.servers[0]!.child.kill('SIGCONT')
  const after = await follow(a, sid, eid, before.at(-1)!.id, 30000)
  await assertOnce(t, a, sid, eid, [...before, ...after], printed(lines))
  t.equal(await r.holderOf(sid), 1, 'the survivor still holds the session')
  t.equal(await metricValue(a, 'replcast_sessions_attached'), 0, 'the paused instance let it go')
  await assertUsable(t, r, a, sid)
})
