// Redis failing at an execution's end: the end is retried, and when Redis stays away longer the
// session is let go and finished from Redis and the container once Redis is back; an SSE reader
// waits through the outage for its done; an execution left without a `done` long past its deadline
// (stale busy) is ended by the reaper. Never busy forever.
import t from 'tap'
import Docker from 'dockerode'
import { API_KEY, startApp, type Harness } from './helpers/app.js'
import { api, createSession, readSse, stdoutOf, stdoutText } from './helpers/client.js'
import { startPrivateRedis } from './helpers/private-redis.js'
import { waitFor } from './helpers/wait.js'
import { DockerDemuxer } from '../src/sandbox/demux.js'
import { redisKeys } from '../src/store/keys.js'

const FAST = { REAPER_INTERVAL_MS: '200', LEASE_TTL_MS: '1000', INTERRUPT_GRACE_MS: '500' }
// Prints, then ends while the test holds Redis down.
const CODE = 'import time\nprint("started", flush=True)\ntime.sleep(1.5)\nprint("late")\nx = 42'

/** Starts CODE over SSE and returns its execution id once it is running. */
async function startRun(h: Harness, sid: string, timeoutS = 5): Promise<string> {
  const res = await fetch(`${h.url}/v1/sessions/${sid}/executions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({ code: CODE, timeout_s: timeoutS }),
  })
  await readSse(res, (e) => e.event === 'stdout')
  return res.headers.get('location')!.split('/').pop()!
}

/** Whether the REPL has written the execution's `done` frame (read from the container's own log). */
async function replSaidDone(containerId: string, eid: string): Promise<boolean> {
  const raw = await new Docker().getContainer(containerId).logs({ stdout: true, stderr: false, follow: false })
  let out = ''
  new DockerDemuxer(
    (b) => (out += b.toString('utf8')),
    () => undefined,
  ).push(raw)
  return out.split('\n').some((line) => line.includes('"type":"done"') && line.includes(`"exec_id":"${eid}"`))
}

async function metric(h: Harness, name: string): Promise<number> {
  const text = await (await fetch(`${h.url}/metrics`)).text()
  const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text)
  return m ? Number(m[1]) : NaN
}

const ended = async (h: Harness, sid: string, eid: string) => {
  const r = await api(h.url, 'GET', `/v1/sessions/${sid}/executions/${eid}`)
  return r.status === 200 && r.body.status !== 'running' && r.body.status !== 'queued'
}

t.test('Redis fails at the end of an execution', async (t) => {
  const redis = await startPrivateRedis()
  t.teardown(() => redis.destroy())

  t.test('back within the retry window: the end is retried and recorded, the session is ready', async (t) => {
    const h = await startApp(t, { ...FAST, REDIS_URL: redis.url, REDIS_RETRY_MS: '60000' })
    const sid = await createSession(h.url)
    const { container_id } = (await h.redis.hgetall(redisKeys(h.prefix).session(sid))) as { container_id: string }
    const eid = await startRun(h, sid)
    await redis.stop()
    t.ok(await waitFor(() => replSaidDone(container_id, eid), 30_000), 'the REPL ended the execution while Redis was down')
    t.ok(await waitFor(async () => (await metric(h, 'replcast_redis_write_retries_total')) >= 1, 30_000), 'recording its end failed and is being retried')
    await redis.start()
    t.ok(await waitFor(() => ended(h, sid, eid), 20000), 'the execution got its end once Redis was back')
    const ex = (await api(h.url, 'GET', `/v1/sessions/${sid}/executions/${eid}`)).body
    t.equal(ex.status, 'ok')
    t.equal(ex.events.at(-1)?.type, 'done', 'its log ends with done')
    t.equal(ex.events.filter((e: any) => e.type === 'done').length, 1, 'exactly one done')
    t.ok(await waitFor(async () => (await api(h.url, 'GET', `/v1/sessions/${sid}`)).body.status === 'ready', 30_000), 'the session is not left busy')
    const after = await api(h.url, 'POST', `/v1/sessions/${sid}/executions`, { code: 'print(x)' })
    t.equal(stdoutText(after.body.events), '42\n', 'the session carries on with its state')
  })

  t.test('away longer than the retry window: the session is let go, then finished from its container once Redis is back', async (t) => {
    const h = await startApp(t, { ...FAST, REDIS_URL: redis.url, REDIS_RETRY_MS: '300' })
    const sid = await createSession(h.url, { idle_timeout_s: 1 })
    const eid = await startRun(h, sid, 3)
    await redis.stop()
    t.ok(await waitFor(async () => (await metric(h, 'replcast_sessions_attached')) === 0, 15000), 'the instance let the session go')
    await redis.start()
    t.ok(await waitFor(() => ended(h, sid, eid), 30000), 'the execution got its end once Redis was back')
    const ex = (await api(h.url, 'GET', `/v1/sessions/${sid}/executions/${eid}`)).body
    t.equal(ex.status, 'ok', 'the end the REPL reported, read back from the container')
    t.equal(ex.events.filter((e: any) => e.type === 'done').length, 1, 'exactly one done')
    t.equal(stdoutText(ex.events), 'started\nlate\n', 'output printed while Redis was down is recovered')
    t.ok(await waitFor(async () => (await api(h.url, 'GET', `/v1/sessions/${sid}`)).body.status === 'ready', 30_000), 'the session is not left busy')
    const after = await api(h.url, 'POST', `/v1/sessions/${sid}/executions`, { code: 'print(x)' })
    t.equal(stdoutText(after.body.events), '42\n', 'the session carries on with its state')
  })
})

t.test('an SSE reader waits through a Redis outage (a restart, a failover) and gets its done', async (t) => {
  const redis = await startPrivateRedis()
  t.teardown(() => redis.destroy())
  const h = await startApp(t, { ...FAST, REDIS_URL: redis.url, REDIS_RETRY_MS: '120000' })
  const sid = await createSession(h.url)
  const eid = await startRun(h, sid, 60)
  const res = await fetch(`${h.url}/v1/sessions/${sid}/executions/${eid}/events`, {
    headers: { authorization: `Bearer ${API_KEY}`, accept: 'text/event-stream' },
  })
  t.equal(res.status, 200)
  const read = readSse(res)
  await redis.stop()
  // After its quiet while the reader reads Redis, which cannot answer: it waits and tries again.
  t.ok(await waitFor(async () => (await metric(h, 'replcast_redis_read_retries_total')) >= 2, 30000), 'the reader tries again while Redis is away')
  await redis.start()
  const events = await read
  t.match(stdoutOf(events), /^started\n/, 'it had the output from before the outage')
  t.equal(events.filter((e) => e.event === 'done').length, 1, 'and gets exactly one done once Redis is back')
  t.equal(events.at(-1)?.data.status, 'ok')
})

t.test('an execution without done long past its deadline (stale busy) is ended by the reaper', async (t) => {
  const h = await startApp(t, FAST)
  const sid = await createSession(h.url)
  const k = redisKeys(h.prefix)
  // What an instance that lost Redis at the wrong moment leaves behind: a running execution an
  // hour past its time limit, nothing driving it, the session busy.
  const eid = 'exe_staleStaleStaleStale'
  const started = Date.now() - 3600_000
  await h.redis
    .multi()
    .hset(k.execution(sid, eid), {
      ...{ id: eid, session_id: sid, tenant: 'alpha', status: 'running', created_at: started, started_at: started },
      ...{ ended_at: '', duration_ms: '', execution_count: '', kind: 'execute', code: 'pass', timeout_ms: 1000 },
    })
    .lpush(k.sessionExecutions(sid), eid)
    .xadd(k.events(sid, eid), '*', 'e', JSON.stringify({ type: 'status', state: 'running', execution_id: eid }))
    .hset(k.session(sid), 'status', 'busy')
    .zadd(k.deadlines(), Date.now(), sid)
    .exec()
  t.ok(await waitFor(() => ended(h, sid, eid), 15000), 'the stale execution was ended')
  const ex = (await api(h.url, 'GET', `/v1/sessions/${sid}/executions/${eid}`)).body
  t.equal(ex.events.at(-1)?.type, 'done', 'with a done')
  t.match(ex.events.find((e: any) => e.type === 'error')?.evalue, /never recorded/, 'an error says why')
  t.ok(await waitFor(async () => (await api(h.url, 'GET', `/v1/sessions/${sid}`)).body.status === 'ready', 30_000), 'the session is ready again')
  const r = await api(h.url, 'POST', `/v1/sessions/${sid}/executions`, { code: 'print(1)' })
  t.equal(stdoutText(r.body.events), '1\n', 'and runs code')
})
