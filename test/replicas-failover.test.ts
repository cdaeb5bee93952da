// Failover between replicas: the instance holding a session is SIGKILLed, or SIGTERMed, while an
// execution runs. A follower on another instance must get exactly one `done` (within the lease TTL
// plus one reaper interval after a kill; a survivor must serve the session within 1 s of a SIGTERM),
// the namespace must survive, and nothing may be left behind.
import t from 'tap'
import { API_KEY, containersOf } from './helpers/app.js'
import { api, createSession, readSse, stdoutOf, stdoutText, type SseEvent } from './helpers/client.js'
import { startReplicas } from './helpers/replicas.js'
import { waitFor } from './helpers/wait.js'

const LEASE_TTL_MS = 3000
const REAPER_INTERVAL_MS = 500
const ENV = { LEASE_TTL_MS: String(LEASE_TTL_MS), REAPER_INTERVAL_MS: String(REAPER_INTERVAL_MS), INSTANCE_HEARTBEAT_MS: '500' }
const auth = { authorization: `Bearer ${API_KEY}` }
const CODE = 'import time\nprint("before", flush=True)\ntime.sleep(1.5)\nprint("after", flush=True)'

/** Starts CODE through `base` as SSE and reads up to its first output; returns its id and that event. */
async function startRunning(base: string, sid: string): Promise<{ eid: string; last: SseEvent }> {
  const res = await fetch(`${base}/v1/sessions/${sid}/executions`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({ code: CODE, timeout_s: 30 }),
  })
  const events = await readSse(res, (e) => e.event === 'stdout')
  return { eid: res.headers.get('location')!.split('/').pop()!, last: events.at(-1)! }
}

/** Follows an execution through `next()` instances from `after` to its done, resuming when an instance ends the stream. */
async function follow(next: () => string, sid: string, eid: string, after: string, deadlineMs: number): Promise<SseEvent[]> {
  const out: SseEvent[] = []
  const end = performance.now() + deadlineMs
  while (performance.now() < end && out.at(-1)?.event !== 'done') {
    const last = out.filter((e) => e.id).at(-1)?.id ?? after
    try {
      const res = await fetch(`${next()}/v1/sessions/${sid}/executions/${eid}/events`, {
        headers: { ...auth, accept: 'text/event-stream', 'last-event-id': last },
        signal: AbortSignal.timeout(Math.max(1, Math.ceil(end - performance.now()))),
      })
      if (res.status === 204) break
      out.push(...(await readSse(res, (e) => e.event === 'done')).filter((e) => e.event !== 'shutdown'))
    } catch {
      /* that instance went away mid-stream, or the deadline passed: resume (or stop) */
    }
  }
  return out
}

t.test('SIGKILL of the holder during an execution: a survivor takes the session over by itself', async (t) => {
  const r = await startReplicas(t, 3, ENV)
  const [a, b, c] = r.servers.map((s) => s.url) as [string, string, string]
  const sid = await createSession(a)
  await api(a, 'POST', `/v1/sessions/${sid}/executions`, { code: 'x = 41' })
  const { eid, last } = await startRunning(a, sid)
  const followed = follow(() => b, sid, eid, last.id, 20000)
  const killedAt = performance.now()
  await r.stop(0, 'SIGKILL')
  const events = await followed
  const doneAfterMs = performance.now() - killedAt
  t.comment(`SIGKILL → done: ${doneAfterMs.toFixed(0)} ms`)
  const dones = events.filter((e) => e.event === 'done')
  t.equal(dones.length, 1, 'the follower on another instance got exactly one done')
  t.equal(dones[0]?.data.status, 'ok', 'the execution was resumed and finished')
  t.equal(stdoutOf(events), 'after\n', 'with the output written meanwhile')
  t.ok(doneAfterMs < LEASE_TTL_MS + REAPER_INTERVAL_MS + 1500, `within the lease TTL plus one reaper interval (${doneAfterMs.toFixed(0)} ms)`)
  t.not(await r.holderOf(sid), 0, 'a survivor holds the session')
  const next = await api(c, 'POST', `/v1/sessions/${sid}/executions`, { code: 'print(x + 1)' })
  t.equal(next.status, 200)
  t.equal(stdoutText(next.body.events), '42\n', 'the namespace survived')
  t.equal((await api(b, 'DELETE', `/v1/sessions/${sid}`)).status, 204)
  t.ok(await waitFor(async () => (await containersOf(r.deployment)).length === 0, 30_000), 'no container left')
})

t.test('SIGTERM of the holder during an execution: a survivor serves the session at once', async (t) => {
  const r = await startReplicas(t, 2, ENV)
  const [a, b] = r.servers.map((s) => s.url) as [string, string]
  const sid = await createSession(a)
  await api(a, 'POST', `/v1/sessions/${sid}/executions`, { code: 'x = 41' })
  const { eid, last } = await startRunning(a, sid)
  const followed = follow(() => b, sid, eid, last.id, 15000)
  const termAt = performance.now()
  const exited = r.stop(0, 'SIGTERM')
  // A command that needs the sandbox, through the survivor: a 503 session_moving would be retried by a client.
  let second: Response | null = null
  while (!second && performance.now() - termAt < 5000) {
    const res = await fetch(`${b}/v1/sessions/${sid}/executions`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ code: 'print(x + 1)' }),
    })
    if (res.status === 200) second = res
    else await res.body?.cancel()
  }
  const servedMs = performance.now() - termAt
  t.comment(`SIGTERM → served by a survivor: ${servedMs.toFixed(0)} ms`)
  t.ok(second, 'the survivor accepted code for the session')
  t.ok(servedMs < 1000, `within 1 s of the SIGTERM (${servedMs.toFixed(0)} ms)`)
  await second?.body?.cancel()
  const events = await followed
  t.equal(events.filter((e) => e.event === 'done').length, 1, 'the running execution got exactly one done')
  t.equal(events.at(-1)?.data.status, 'ok')
  t.equal(stdoutOf(events), 'after\n')
  const eid2 = second?.headers.get('location')?.split('/').pop() ?? ''
  const events2 = await follow(() => b, sid, eid2, '', 10000)
  t.equal(events2.filter((e) => e.event === 'done').length, 1, 'the code sent meanwhile ran, one done')
  t.equal(stdoutOf(events2), '42\n', 'in the same namespace')
  await exited
  t.equal(r.servers[0]!.child.exitCode, 0, 'the stopped instance exited cleanly')
  t.equal(await r.holderOf(sid), 1, 'the survivor holds the session')
  t.equal((await api(b, 'DELETE', `/v1/sessions/${sid}`)).status, 204)
  t.ok(await waitFor(async () => (await containersOf(r.deployment)).length === 0, 30_000), 'no container left')
})
