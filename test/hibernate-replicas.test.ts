// Hibernation with two API instances on one engine: a hibernate sent to the instance that does not
// hold the session is done by its holder; concurrent requests at both instances wake it once; at
// the idle deadline exactly one instance hibernates it.
import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { api, createSession, executeSse, stdoutOf } from './helpers/client.js'
import { checkpointEngineHost } from './helpers/hibernation.js'
import { metricValue } from './helpers/metrics.js'
import { startReplicas } from './helpers/replicas.js'
import { waitFor } from './helpers/wait.js'

t.test('two instances', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'rc-checkpoints-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const env = { DOCKER_HOST: await checkpointEngineHost(), SANDBOX_RUNTIME: 'runsc', CHECKPOINT_DIR: dir, REAPER_INTERVAL_MS: '100' }
  const r = await startReplicas(t, 2, env)
  const urls = r.servers.map((s) => s.url)
  const sum = async (name: string) => (await Promise.all(urls.map((u) => metricValue(u, name)))).reduce((a, b) => a + b, 0)

  t.test('hibernate at the non-holder, then requests at both wake it once', async (t) => {
    const sid = await createSession(urls[0]!)
    await executeSse(urls[0]!, sid, 'n = 7')
    const holder = await r.holderOf(sid)
    const other = urls[1 - holder]!
    const h = await api(other, 'POST', `/v1/sessions/${sid}/hibernate`)
    t.equal(h.status, 200, 'answered through the holder', { body: h.body })
    t.equal(h.body.status, 'hibernated')
    t.equal(await sum('replcast_session_hibernate_seconds_count'), 1)
    const runs = await Promise.all(Array.from({ length: 6 }, (_, i) => executeSse(urls[i % 2]!, sid, `print(n * ${i})`)))
    t.same(
      runs.map((x) => x.status),
      Array(6).fill(200),
    )
    t.same(
      runs.map((x) => stdoutOf(x.events)),
      Array.from({ length: 6 }, (_, i) => `${7 * i}\n`),
    )
    t.equal(await sum('replcast_session_wake_seconds_count'), 1, 'one wake across both instances')
  })

  t.test('at the idle deadline exactly one instance hibernates the session', async (t) => {
    const before = await sum('replcast_session_hibernate_seconds_count')
    const sid = await createSession(urls[1]!, { idle_timeout_s: 1, idle_action: 'hibernate' })
    t.ok(await waitFor(async () => (await api(urls[0]!, 'GET', `/v1/sessions/${sid}`)).body.status === 'hibernated', 15000), 'hibernated')
    // The metric is counted once the container is removed, a moment after the record says hibernated.
    t.ok(await waitFor(async () => (await sum('replcast_session_hibernate_seconds_count')) > before, 30_000), 'counted')
    t.equal((await sum('replcast_session_hibernate_seconds_count')) - before, 1, 'once')
    t.equal(stdoutOf((await executeSse(urls[0]!, sid, 'print(1)')).events), '1\n')
  })
})

t.test("a checkpoint that outlasts the lease keeps the session's lease held throughout", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'rc-checkpoints-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const env = { DOCKER_HOST: await checkpointEngineHost(), SANDBOX_RUNTIME: 'runsc', CHECKPOINT_DIR: dir, LEASE_TTL_MS: '1500', INSTANCE_HEARTBEAT_MS: '300' }
  const r = await startReplicas(t, 2, env)
  const url = r.servers[0]!.url
  const sid = await createSession(url)
  // 100 MB of random floats: seconds to checkpoint and to restore, longer than a lease.
  await executeSse(url, sid, 'import numpy\nbig = numpy.random.rand(12_500_000)\ntotal = float(big.sum())')
  const lease = `${r.prefix}{${sid}}:lease`
  const holder = await r.redis.get(lease)
  const seen = new Set<string | null>()
  let done = false
  const watching = (async () => {
    while (!done) {
      seen.add(await r.redis.get(lease))
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  })()
  const h = await api(url, 'POST', `/v1/sessions/${sid}/hibernate`)
  done = true
  await watching
  t.equal(h.status, 200, 'hibernated', { body: h.body })
  seen.delete(null) // released at the end, as it should be
  t.same([...seen], [holder], 'held by the same instance the whole time')
  const out = stdoutOf((await executeSse(r.servers[1]!.url, sid, 'print(float(big.sum()) == total)')).events)
  t.equal(out, 'True\n', 'woken through the other instance with its 100 MB')
})
