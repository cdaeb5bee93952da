// A tenant against shared Redis storage: its event logs stay within max_event_bytes (oldest ended
// logs go first, then live output is truncated with a limit event) without touching another
// tenant's logs, and its running executions hold their quota slots however short a later one is.
import t from 'tap'
import { API_KEY, OTHER_KEY, startApp, type Harness } from './helpers/app.js'
import { api, createSession, readSse, stdoutOf, stdoutText, type SseEvent } from './helpers/client.js'
import { executeWithin, fmtStats, NeighbourProbe } from './helpers/neighbour.js'
import { logEntries } from './helpers/logs.js'
import { waitFor } from './helpers/wait.js'
import { redisKeys } from '../src/store/keys.js'

/** What each stored event costs against max_event_bytes beyond its JSON (src/store/event-bytes.ts). */
const ENTRY_OVERHEAD_BYTES = 64
const LIMIT = 600_000

const execId = (events: SseEvent[]) => events[0]?.data.execution_id as string

/** Bytes the tenant's logs that still exist hold, counted from the logs themselves (streams or packed). */
async function keptBytes(h: Harness, sid: string, eids: string[]): Promise<{ bytes: number; kept: string[] }> {
  let bytes = 0
  const kept: string[] = []
  for (const eid of eids) {
    const rows = await logEntries(h.redis, h.prefix, sid, eid)
    if (rows.length === 0) continue
    kept.push(eid)
    for (const [, json] of rows) bytes += Buffer.byteLength(json) + ENTRY_OVERHEAD_BYTES
  }
  return { bytes, kept }
}

/** Starts an execution with SSE and collects its events as they come; `ended` resolves at its done. */
async function openExecution(h: Harness, sid: string, body: object): Promise<{ status: number; events: SseEvent[]; ended: Promise<SseEvent[]> }> {
  const res = await fetch(`${h.url}/v1/sessions/${sid}/executions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(60000),
  })
  const events: SseEvent[] = []
  if (res.status !== 200) return { status: res.status, events, ended: Promise.resolve(events) }
  const ended = readSse(res, (e) => {
    events.push(e)
    return e.event === 'done'
  })
  return { status: res.status, events, ended }
}

t.test('max_event_bytes: oldest ended logs go first, then live output is truncated; another tenant is untouched', async (t) => {
  const h = await startApp(t, { REPLCAST_TENANT_LIMITS: JSON.stringify({ alpha: { max_event_bytes: LIMIT } }) })
  const keys = redisKeys(h.prefix)
  const a = await createSession(h.url, { limits: { memory_mb: 256, output_bytes: 2_000_000 } })
  const b = await createSession(h.url, { limits: { memory_mb: 256 } }, OTHER_KEY)
  const runA = (code: string) => executeWithin(h.url, a, code, { key: API_KEY, withinMs: 60000 })

  // The neighbour tenant's logs, written before the flood.
  const betaIds: string[] = []
  const betaBodies: unknown[] = []
  for (let i = 0; i < 3; i++) {
    const r = await executeWithin(h.url, b, `print("b" * 100_000)`, { key: OTHER_KEY })
    betaIds.push(execId(r.events))
    betaBodies.push((await api(h.url, 'GET', `/v1/sessions/${b}/executions/${execId(r.events)}`, undefined, { key: OTHER_KEY })).body)
  }
  const probe = new NeighbourProbe(h.url, b, OTHER_KEY)
  probe.start()

  // Four ended logs of about 150 kB each: the fourth does not fit beside the first three.
  const alphaIds: string[] = []
  for (let i = 1; i <= 4; i++) {
    const r = await runA(`print("${i}" * 150_000)`)
    t.equal(r.done?.data.status, 'ok')
    alphaIds.push(execId(r.events))
  }
  const first = await api(h.url, 'GET', `/v1/sessions/${a}/executions/${alphaIds[0]}`)
  t.equal(first.status, 404, 'the oldest ended log was dropped: its execution answers 404')
  t.equal(first.body.code, 'execution_not_found')
  for (const [i, eid] of alphaIds.slice(1).entries()) {
    const r = await api(h.url, 'GET', `/v1/sessions/${a}/executions/${eid}`)
    t.equal(r.status, 200, `log ${i + 2} is kept`)
    const out = stdoutText(r.body.events)
    t.equal(out, `${i + 2}`.repeat(150_000) + '\n', `log ${i + 2} is whole`)
  }

  // A running execution that prints more than the whole limit: the ended logs go, then its output
  // is truncated with a limit event while it goes on running.
  const { events: flood, ended } = await openExecution(h, a, {
    code: 'import time\nprinted = 0\nfor i in range(10):\n    print(str(i) * 100_000, flush=True); printed += 1\nwhile True:\n    time.sleep(0.05)',
  })
  t.ok(await waitFor(() => flood.some((e) => e.event === 'limit'), 30000), 'the running execution gets a limit event')
  const floodId = execId(flood)
  const limit = flood.find((e) => e.event === 'limit')
  t.match(limit?.data, { what: 'tenant_event_bytes' }, 'the limit event names the tenant budget')
  t.ok(limit?.data.dropped_bytes > 0, `it counts the dropped bytes (${limit?.data.dropped_bytes})`)
  t.equal((await api(h.url, 'GET', `/v1/sessions/${a}/executions/${floodId}`)).body.status, 'running', 'the execution is still running')
  t.equal((await api(h.url, 'POST', `/v1/sessions/${a}/interrupt`)).status, 202)
  await ended
  t.equal(flood.at(-1)?.data.status, 'interrupted', 'it ran until interrupted, then ended with its one done')
  const limits = flood.filter((e) => e.event === 'limit' && e.data.what === 'tenant_event_bytes')
  t.equal(limits.length, 2, 'one limit event when truncation began, one before done')
  t.ok(flood.at(-2) === limits[1] && limits[1]!.data.dropped_bytes > 0, `the last counts what was dropped after the first (${limits[1]?.data.dropped_bytes})`)
  const text = stdoutOf(flood)
  const full = Array.from({ length: 10 }, (_, i) => `${i}`.repeat(100_000) + '\n').join('')
  t.ok(text.length > 0 && text.length < full.length && full.startsWith(text), `the output was truncated, not cut into pieces (${text.length} bytes kept)`)
  const after = await runA('print(printed)')
  t.equal(stdoutOf(after.events), '10\n', 'every print ran after the truncation began')
  alphaIds.push(floodId, execId(after.events))
  for (const eid of alphaIds.slice(1, 4)) t.equal((await api(h.url, 'GET', `/v1/sessions/${a}/executions/${eid}`)).status, 404, `ended log ${eid} made room`)

  // The accounting in Redis matches the logs that are kept, for both tenants.
  const alphaKept = await keptBytes(h, a, alphaIds)
  const alphaTotal = Number(await h.redis.get(keys.tenantEventBytes('alpha')))
  t.equal(alphaTotal, alphaKept.bytes, `alpha's total (${alphaTotal}) is the sum of its kept logs (${alphaKept.kept.length})`)
  t.ok(alphaTotal <= LIMIT + 1024, `alpha holds ${alphaTotal} bytes (limit ${LIMIT}, plus its status and done events)`)
  const perLog = await h.redis.hgetall(keys.tenantLogBytes('alpha'))
  t.same(Object.keys(perLog).sort(), alphaKept.kept.map((eid) => `${a}/${eid}`).sort(), 'one entry per kept log')

  const stats = await probe.stop()
  t.comment(fmtStats(stats))
  t.equal(stats.failures.length, 0, 'the neighbour never failed')
  for (const [i, eid] of betaIds.entries()) {
    const r = await api(h.url, 'GET', `/v1/sessions/${b}/executions/${eid}`, undefined, { key: OTHER_KEY })
    t.same(r.body, betaBodies[i], `beta's log ${i + 1} is untouched`)
  }
  const betaLogs = Object.keys(await h.redis.hgetall(keys.tenantLogBytes('beta'))).map((m) => m.split('/')[1]!)
  const betaKept = await keptBytes(h, b, betaLogs)
  t.equal(Number(await h.redis.get(keys.tenantEventBytes('beta'))), betaKept.bytes, "beta's total is the sum of its logs")
  t.ok(
    betaIds.every((eid) => betaKept.kept.includes(eid)),
    "beta's logs are all kept",
  )
})

t.test('running slots are not forgotten when a shorter execution ends; a fractional timeout_s works', async (t) => {
  const GRACE_MS = 200
  const h = await startApp(t, { INTERRUPT_GRACE_MS: String(GRACE_MS), REPLCAST_TENANT_LIMITS: JSON.stringify({ alpha: { max_concurrent_executions: 2 } }) })
  const key = redisKeys(h.prefix).tenantRunning('alpha')
  const a = await createSession(h.url, { limits: { memory_mb: 256 } })
  const b = await createSession(h.url, { limits: { memory_mb: 256 } })

  // A long execution holds one of the two slots.
  const { events: long, ended: longEnded } = await openExecution(h, a, { code: 'import time\ntime.sleep(60)', timeout_s: 60 })
  t.ok(await waitFor(() => long.some((e) => e.event === 'status' && e.data.state === 'running'), 30_000), 'the long execution runs')
  const longId = execId(long)
  const longUntil = Number(await h.redis.zscore(key, longId))

  // A short one of the same tenant ends; its slot would have lapsed 2 × (timeout + grace) after it started.
  const shortStart = Date.now()
  const short = await executeWithin(h.url, b, 'print(1)', { key: API_KEY, timeout_s: 0.5 })
  t.equal(short.done?.data.status, 'ok')
  t.ok(Number(await h.redis.pexpiretime(key)) >= longUntil, "the slot set lives at least as long as the long execution's slot")
  t.ok(await waitFor(() => Date.now() > shortStart + 2 * (500 + GRACE_MS) + 300, 10000))
  t.same(await h.redis.zrange(key, '0', '-1'), [longId], 'the long execution still holds its slot after the short one lapsed')

  // The quota is still enforced: one more fits, the next does not.
  const queued = await openExecution(h, a, { code: 'print(3)' })
  t.equal(queued.status, 200, 'a second execution queues behind the long one')
  t.ok(await waitFor(() => queued.events.length > 0, 30_000))
  t.match(queued.events[0]?.data, { state: 'queued' })
  const third = await api(h.url, 'POST', `/v1/sessions/${b}/executions`, { code: 'print(4)' })
  t.equal(third.status, 429, 'a third execution is refused while two hold the slots')
  t.equal(third.body.code, 'quota_exceeded')
  await api(h.url, 'POST', `/v1/sessions/${a}/interrupt`)
  t.equal((await longEnded).at(-1)?.data.status, 'interrupted')
  t.equal(stdoutOf(await queued.ended), '3\n', 'the queued one runs after it')

  // Issue 15: a computed time that is not a whole number of milliseconds never reaches Redis.
  const fractional = await api(h.url, 'POST', `/v1/sessions/${b}/executions`, { code: 'print(2)', timeout_s: 1.7256 })
  t.equal(fractional.status, 200, `a fractional timeout_s answers 200 (${JSON.stringify(fractional.body).slice(0, 200)})`)
  t.equal(fractional.body.status, 'ok')
})
