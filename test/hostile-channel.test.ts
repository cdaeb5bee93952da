// Sandbox code against the API process through the REPL's own channel (the REPL shares its process,
// so code can reach the private fds): it stops reading its input while making the host answer
// without end, floods the channel with junk, and forges frames. Each attack must stay in its own
// session while a neighbour of another tenant keeps answering print(1); the API's memory and log
// are measured before and after.
import t, { type Test } from 'tap'
import Docker from 'dockerode'
import { Redis } from 'ioredis'
import { API_KEY, OTHER_KEY } from './helpers/app.js'
import { api, createSession, readSse, type SseEvent } from './helpers/client.js'
import { NeighbourProbe, executeWithin, fmtStats } from './helpers/neighbour.js'
import { CHANNEL_PRELUDE, figuresOf, fmtFigures, logLinesAbout } from './helpers/channel-attack.js'
import { isolatedServer } from './helpers/server-process.js'
import { waitFor } from './helpers/wait.js'
import { LABEL } from '../src/sandbox/labels.js'

const LIMITS = { memory_mb: 256, pids: 64, cpus: 0.5 }
const NEIGHBOUR_MAX_MS = 2000
const INPUT_BUFFER_BYTES = 2 * 1024 * 1024
const MAX_CONCURRENT = 2

t.test('the sandbox against the API process', async (t) => {
  const h = await isolatedServer(t, 'channel', {
    SANDBOX_INPUT_BUFFER_BYTES: String(INPUT_BUFFER_BYTES),
    INTERRUPT_GRACE_MS: '1000',
    TENANT_RATE_PER_MIN: '1000000',
    REPLCAST_TENANT_LIMITS: JSON.stringify({ alpha: { max_concurrent_executions: MAX_CONCURRENT } }),
  })
  const url = h.server.url
  const redis = new Redis(h.env.REDIS_URL!)
  t.teardown(() => redis.disconnect())
  const neighbour = await createSession(url, { limits: LIMITS }, OTHER_KEY)
  const probe = new NeighbourProbe(url, neighbour, OTHER_KEY)
  const session = async (sid: string) => (await api(url, 'GET', `/v1/sessions/${sid}`)).body
  const running = async (sid: string) =>
    (await new Docker().listContainers({ filters: { label: [`${LABEL.session}=${sid}`], status: ['running'] } })).length > 0

  /** Runs `body` while the neighbour is probed; reports the neighbour's latency and the API's figures. */
  const attack = (name: string, body: (t: Test) => Promise<void>) =>
    t.test(name, async (t) => {
      const before = figuresOf(h.server)
      probe.start()
      try {
        await body(t)
      } finally {
        const stats = await probe.stop()
        const after = figuresOf(h.server)
        t.comment(fmtStats(stats))
        t.comment(fmtFigures(name, before, after))
        t.same(stats.failures, [], 'the neighbour answered every print(1)')
        t.ok(stats.maxMs < NEIGHBOUR_MAX_MS, `the neighbour's slowest print(1) took ${stats.maxMs.toFixed(0)} ms (< ${NEIGHBOUR_MAX_MS})`)
        t.ok(after.peakRssMb - before.peakRssMb < 100, `the API's peak memory grew ${(after.peakRssMb - before.peakRssMb).toFixed(0)} MB (< 100)`)
      }
    })

  await attack('a sandbox that stops reading its input while the host answers a flood of llm_request frames is ended', async (t) => {
    const sid = await createSession(url, { limits: LIMITS })
    // Each request names a 100 kB id, which the host's llm_response echoes: 3000 of them are 300 MB of answers.
    const code =
      CHANNEL_PRELUDE +
      [
        'r, w = os.pipe()',
        'os.dup2(r, _ch.in_fd)',
        'line = (json.dumps({"v": 1, "type": "llm_request", "id": "x" * 100000, "exec_id": "not-running", "prompts": ["hi"]}) + "\\n").encode()',
        'for i in range(3000):',
        '    data = line',
        '    while data:',
        '        data = data[os.write(_ch.out_fd, data):]',
        'time.sleep(60)',
      ].join('\n')
    const r = await executeWithin(url, sid, code, { key: API_KEY, timeout_s: 20, withinMs: 60000 })
    t.equal(r.done?.data.status, 'error', 'the execution ends with status error')
    t.match(r.events.find((e) => e.event === 'error')?.data.evalue, /stopped reading its input/, 'an error event says why')
    t.ok(r.ms < 15000, `it ended after ${r.ms.toFixed(0)} ms, before its 20 s timeout`)
    t.ok(await waitFor(async () => (await session(sid)).status === 'dead', 30_000), 'the session reports dead')
    t.ok(await waitFor(async () => !(await running(sid)), 30_000), 'its sandbox no longer runs')
    t.equal((await api(url, 'POST', `/v1/sessions/${sid}/restart`)).status, 200, 'restart revives the session')
    const again = await executeWithin(url, sid, 'print("fresh")', { key: API_KEY, withinMs: 30000 })
    t.equal(again.done?.data.status, 'ok', 'and it runs code again')
  })

  await attack('a sandbox that floods its channel with junk lines is ended, and the API logs a bounded number of lines about it', async (t) => {
    const sid = await createSession(url, { limits: LIMITS })
    const from = h.server.output().length
    const code =
      CHANNEL_PRELUDE +
      [
        'junk = b"x\\n" * 5000',
        'for i in range(40):',
        '    raw_junk = junk',
        '    while raw_junk:',
        '        raw_junk = raw_junk[os.write(_ch.out_fd, raw_junk):]',
        'time.sleep(60)',
      ].join('\n')
    const r = await executeWithin(url, sid, code, { key: API_KEY, timeout_s: 15, withinMs: 60000 })
    t.equal(r.done?.data.status, 'error', 'the execution ends with status error')
    t.match(r.events.find((e) => e.event === 'error')?.data.evalue, /broke the REPL protocol/, 'an error event says why')
    t.ok(r.ms < 10000, `it ended after ${r.ms.toFixed(0)} ms, before its 15 s timeout`)
    t.ok(await waitFor(async () => (await session(sid)).status === 'dead', 30_000), 'the session reports dead')
    t.ok(await waitFor(async () => logLinesAbout(h.server, sid, from).some((l) => /suppressed/.test(l)), 15000), 'a summary counts the suppressed lines')
    const lines = logLinesAbout(h.server, sid, from)
    t.ok(lines.length < 60, `the API logged ${lines.length} lines about the session (200,000 junk lines were sent)`)
  })

  await attack('forged frames with execution_count that is not a number do not break reads of the execution or the session', async (t) => {
    const sid = await createSession(url, { limits: LIMITS })
    const code =
      CHANNEL_PRELUDE +
      [
        'raw({"v": 1, "type": "result", "exec_id": _me, "execution_count": "seven", "data": {"text/plain": "1"}})',
        'raw({"v": 1, "type": "result", "exec_id": _me, "execution_count": {"n": 1}, "data": "not a bundle"})',
        'raw({"v": 1, "type": "result", "exec_id": _me, "execution_count": 2.5, "data": {"text/plain": "2"}})',
        'raw({"v": 1, "type": "display", "exec_id": _me, "data": [1, 2], "metadata": "m"})',
        'raw({"v": 1, "type": "limit", "exec_id": _me, "what": {"w": 1}, "dropped_bytes": "lots"})',
        // 1e400 is valid JSON that parses to Infinity.
        '_ch.flush()',
        'os.write(_ch.out_fd, (\'{"v": 1, "type": "done", "exec_id": "%s", "status": "ok", "execution_count": 1e400}\\n\' % _me).encode())',
      ].join('\n')
    const r = await executeWithin(url, sid, code, { key: API_KEY, timeout_s: 10, withinMs: 30000 })
    t.equal(r.done?.data.status, 'ok', 'the forged done ends the execution (it is the running one)')
    const eid = r.events[0]?.data.execution_id as string
    const got = await api(url, 'GET', `/v1/sessions/${sid}/executions/${eid}`)
    t.equal(got.status, 200, `GET of the execution answers ${got.status}`)
    for (const e of got.body.events ?? []) {
      if ('execution_count' in e) t.ok(Number.isSafeInteger(e.execution_count), `${e.type}.execution_count is an integer or absent (${e.execution_count})`)
    }
    t.ok(got.body.execution_count === null || Number.isSafeInteger(got.body.execution_count), `the execution's count: ${got.body.execution_count}`)
    const s = await api(url, 'GET', `/v1/sessions/${sid}`)
    t.equal(s.status, 200, `GET of the session answers ${s.status}`)
    t.ok(Number.isSafeInteger(s.body.execution_count), `the session's count: ${s.body.execution_count}`)
  })

  await attack("a forged done does not free the tenant's execution slot while the code still runs", async (t) => {
    const [s1, s2] = [await createSession(url, { limits: LIMITS }), await createSession(url, { limits: LIMITS })]
    const slots = () => redis.zcard(`${h.env.REPLCAST_KEY_PREFIX}tenant:alpha:running`)
    // The interrupt is the test's signal: the code forges its done then and keeps running, deaf to interrupts.
    const a =
      CHANNEL_PRELUDE +
      [
        'try:',
        '    while True:',
        '        time.sleep(0.05)',
        'except KeyboardInterrupt:',
        '    _ch.send("done", exec_id=_me, status="ok")',
        'while True:',
        '    try:',
        '        time.sleep(0.05)',
        '    except KeyboardInterrupt:',
        '        pass',
      ].join('\n')
    const stream = await fetch(`${url}/v1/sessions/${s1}/executions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ code: a, timeout_s: 60 }),
    })
    const aEvents: SseEvent[] = []
    const aDone = readSse(stream, (e) => {
      aEvents.push(e)
      return e.event === 'done'
    })
    t.ok(await waitFor(() => aEvents.some((e) => e.event === 'status' && e.data.state === 'running'), 30_000), 'A runs')
    const b = executeWithin(url, s1, 'print("b")', { key: API_KEY, timeout_s: 4, withinMs: 30000 })
    t.ok(await waitFor(async () => (await slots()) === MAX_CONCURRENT, 30_000), 'A runs and B waits behind it: the tenant holds both its slots')
    t.equal((await api(url, 'POST', `/v1/sessions/${s1}/interrupt`)).status, 202)
    await aDone
    t.equal(aEvents.at(-1)?.data.status, 'ok', "A's forged done ended it for the host")
    // The done reaches a live reader as its write leaves for Redis: the slots are read once that write is in.
    const aId = aEvents.find((e) => e.event === 'status')?.data.execution_id
    const aRecorded = async () => (await api(url, 'GET', `/v1/sessions/${s1}/executions/${aId}`)).body?.status === 'ok'
    t.ok(await waitFor(aRecorded, 30_000), "A's end is recorded")
    t.equal(await slots(), MAX_CONCURRENT, "A's slot is kept: B has not started in the REPL, so A's code may still run")
    const c = await api(url, 'POST', `/v1/sessions/${s2}/executions`, { code: 'print("c")' })
    t.equal(c.status, 429, `another session of the tenant gets no slot beyond the quota (${c.status} ${c.body?.code})`)
    const br = await b
    t.ok(['timeout', 'killed'].includes(br.done?.data.status), `B ends at its timeout behind A's code (${br.done?.data.status})`)
    t.ok(await waitFor(async () => (await slots()) === 0, 30_000), 'every slot is free once nothing runs')
  })
})
