// The warm pool (src/sessions/supply/pool.ts): ready sandboxes for the default template, runtime and limits,
// taken by matching sessions and refilled in the background; each handed out once and never when
// dead; removed on shutdown and by the orphan sweep; made at a bounded pace when they cannot be made.
import t, { type Test } from 'tap'
import Docker from 'dockerode'
import { containersOf, startApp, type Harness } from './helpers/app.js'
import { pooledLabels } from '../src/sandbox/labels.js'
import { api, createSession, executeSse, stdoutOf } from './helpers/client.js'
import { buildImage } from './helpers/images.js'
import { isolatedServer, killHard } from './helpers/server-process.js'
import { metricValue } from './helpers/metrics.js'
import { waitFor } from './helpers/wait.js'

const docker = new Docker()
const POOL = { SANDBOX_POOL_SIZE: '2' }

const poolContainers = async (deployment: string) => (await containersOf(deployment)).filter((c) => c.Labels['replcast.pool'] === 'true')
const containerOf = async (h: Harness, sid: string) => (await h.redis.hget(`${h.prefix}{${sid}}:session`, 'container_id')) ?? ''
const bindingOf = async (h: Harness, cid: string) => h.redis.hget(`${h.prefix}pool-bindings`, cid)
const nameOf = async (cid: string) => (await docker.getContainer(cid).inspect()).Name.replace(/^\//, '')
const ready = (h: Harness) => metricValue(h.url, 'replcast_pool_sandboxes', { state: 'ready' })
const takes = (h: Harness, result: string) => metricValue(h.url, 'replcast_pool_takes_total', { result })
const poolFull = (h: Harness, n = 2) => waitFor(async () => (await ready(h)) === n, 60000, 50)

async function runsCode(t: Test, h: Harness, sid: string): Promise<void> {
  const r = await executeSse(h.url, sid, 'print(6 * 7)')
  t.equal(stdoutOf(r.events), '42\n', `session ${sid} runs code`)
}

t.test('a matching session takes a pooled sandbox, carrying no tenant until then, and the pool refills', async (t) => {
  const h = await startApp(t, POOL)
  t.ok(await poolFull(h), 'two sandboxes ready')
  const waiting = await poolContainers(h.deployment)
  t.equal(waiting.length, 2)
  for (const c of waiting) {
    t.equal(c.State, 'running')
    t.notOk(c.Labels['replcast.session'], 'no session label on a pooled sandbox')
    t.notOk(c.Labels['replcast.tenant'], 'no tenant label on a pooled sandbox')
    t.match(c.Names[0], /^\/replcast-pool-/, 'named as a pooled sandbox while it waits')
    t.ok(Number(c.Labels['replcast.memory']) > 0, 'its memory counts on the host like any sandbox')
  }

  const sid = await createSession(h.url)
  const cid = await containerOf(h, sid)
  t.ok(
    waiting.some((c) => c.Id === cid),
    'the session runs in a pooled sandbox',
  )
  t.equal(await bindingOf(h, cid), sid, 'Redis records the session that took it')
  // Renamed after the reply (with the refill): a Docker call the create does not wait for.
  t.ok(await waitFor(async () => (await nameOf(cid)) === `replcast-${sid}`), 'once taken, it is named after its session, as a cold sandbox is')
  t.equal(await takes(h, 'hit'), 1)
  await runsCode(t, h, sid)

  t.ok(await poolFull(h), 'the pool refills in the background')
  t.equal((await poolContainers(h.deployment)).length, 3, 'two waiting, one serving its session')
  t.equal((await api(h.url, 'DELETE', `/v1/sessions/${sid}`)).status, 204)
  t.notOk(
    (await containersOf(h.deployment)).some((c) => c.Id === cid),
    'a pooled sandbox goes with its session: never reused',
  )
})

t.test('a burst of creates: each pooled sandbox is handed out once, the rest are made cold, then the pool refills', async (t) => {
  const h = await startApp(t, POOL)
  t.ok(await poolFull(h))
  const waiting = new Set((await poolContainers(h.deployment)).map((c) => c.Id))
  const ids = await Promise.all(Array.from({ length: 5 }, () => createSession(h.url)))
  const cids = await Promise.all(ids.map((sid) => containerOf(h, sid)))
  t.equal(new Set(cids).size, 5, 'five sessions, five different sandboxes')
  t.equal(cids.filter((c) => waiting.has(c)).length, 2, 'both pooled sandboxes were taken, once each')
  const hit = await takes(h, 'hit')
  t.ok(hit >= 2, `the pooled ones were hits (${hit}; a refill may have been quick enough for a third)`)
  t.equal(hit + (await takes(h, 'miss')), 5, 'every create asked the pool')
  for (const [i, cid] of cids.entries()) if (waiting.has(cid)) t.equal(await bindingOf(h, cid), ids[i])
  await Promise.all(ids.map((sid) => runsCode(t, h, sid)))
  t.ok(await poolFull(h), 'refilled after the burst')
})

t.test('a request that does not match the pool is created cold and leaves the pool alone', async (t) => {
  const h = await startApp(t, POOL)
  t.ok(await poolFull(h))
  const waiting = new Set((await poolContainers(h.deployment)).map((c) => c.Id))
  for (const body of [{ limits: { memory_mb: 256 } }, { env: { GREETING: 'hi' } }]) {
    const sid = await createSession(h.url, body)
    const c = (await containersOf(h.deployment)).find((x) => x.Id !== '' && x.Labels['replcast.session'] === sid)
    t.ok(c, `${JSON.stringify(body)}: a cold sandbox labelled with its session`)
    t.equal(c?.Names[0], `/replcast-${sid}`, 'and named after it')
    t.notOk(waiting.has(c?.Id ?? ''))
  }
  t.equal(await ready(h), 2, 'the pool is untouched')
  t.equal(await takes(h, 'hit'), 0)
})

t.test('a pooled sandbox that died or hangs while waiting is never handed out', async (t) => {
  const h = await startApp(t, POOL)
  t.ok(await poolFull(h))
  const [a] = await poolContainers(h.deployment)
  // Killed: the next create must not get it, even before the pool has seen the exit.
  await docker.getContainer(a!.Id).kill()
  const first = await createSession(h.url)
  t.not(await containerOf(h, first), a!.Id, 'the killed sandbox is not handed out')
  await runsCode(t, h, first)
  t.ok(await waitFor(async () => !(await containersOf(h.deployment)).some((c) => c.Id === a!.Id)), 'and it is removed')

  // Frozen (its channel open, its REPL not answering): only the probe at take time can tell.
  t.ok(await poolFull(h))
  const unbound: string[] = []
  for (const c of await poolContainers(h.deployment)) if (!(await bindingOf(h, c.Id))) unbound.push(c.Id)
  t.equal(unbound.length, 2)
  await Promise.all(unbound.map((id) => docker.getContainer(id).pause()))
  const second = await createSession(h.url)
  t.notOk(unbound.includes(await containerOf(h, second)), 'a sandbox whose REPL does not answer is not handed out')
  await runsCode(t, h, second)
  t.ok((await takes(h, 'discarded')) >= 2, 'both were discarded')
  t.ok(await waitFor(async () => !(await containersOf(h.deployment)).some((c) => unbound.includes(c.Id))), 'and removed')
})

t.test('shutdown removes the pool; a taken sandbox stays with its session and is re-adopted', async (t) => {
  const h = await startApp(t, POOL)
  t.ok(await poolFull(h))
  const sid = await createSession(h.url)
  const cid = await containerOf(h, sid)
  t.ok(await poolFull(h))
  await h.stop()
  t.same(
    (await poolContainers(h.deployment)).map((c) => c.Id),
    [cid],
    'only the sandbox serving a session is left',
  )
  t.equal(await nameOf(cid), `replcast-${sid}`, 'named after its session (by shutdown at the latest)')
  await h.start()
  await runsCode(t, h, sid)
  t.ok(
    (await containersOf(h.deployment)).some((c) => c.Id === cid),
    'the start-up sweep keeps a bound sandbox whose session Redis knows',
  )
})

t.test('the orphan sweep removes pooled sandboxes of a gone instance, of an earlier run, and of a gone session', async (t) => {
  const h = await startApp(t, { LEASE_TTL_MS: '1000' })
  const made = async (instance: string) => {
    const c = await docker.createContainer({
      Image: h.config.SANDBOX_IMAGE,
      Cmd: ['sleep', '300'],
      Labels: pooledLabels(h.deployment, instance, 64 * 2 ** 20),
      HostConfig: { NetworkMode: 'none' },
    })
    await c.start()
    return c.id
  }
  const liveKey = `${h.prefix}instance:other-live:pool`
  await h.redis.set(liveKey, '1', 'PX', 60000)
  const sid = await createSession(h.url)
  // The leftovers are made while no instance runs (its periodic sweep would race the test's set-up).
  await h.stop()
  const ids = {
    gone: await made('gone-instance'),
    earlier: await made(h.config.instanceId),
    otherLive: await made('other-live'),
    boundLive: await made('gone-instance'),
    boundGone: await made('gone-instance'),
  }
  await h.redis.hset(`${h.prefix}pool-bindings`, ids.boundLive, sid, ids.boundGone, 'ses_nosuchsessionnosuch0')
  await h.start()
  const left = new Set((await containersOf(h.deployment)).map((c) => c.Id))
  t.notOk(left.has(ids.gone), 'a pooled sandbox of an instance whose heartbeat lapsed goes')
  t.notOk(left.has(ids.earlier), 'one this instance made before it restarted goes (the pool is not re-adopted)')
  t.notOk(left.has(ids.boundGone), 'one bound to a session Redis no longer knows goes')
  t.ok(left.has(ids.otherLive), "a live instance's pool stays")
  t.ok(left.has(ids.boundLive), 'one serving a live session stays')
  t.equal(await bindingOf(h, ids.boundGone), null, 'its binding is dropped')

  await h.redis.del(liveKey)
  t.ok(
    await waitFor(async () => !(await containersOf(h.deployment)).some((c) => c.Id === ids.otherLive), 15000),
    "the periodic sweep removes an instance's pool once its heartbeat lapses",
  )
})

t.test('an instance killed with a full pool: another instance sweeps its pooled sandboxes', async (t) => {
  const dead = await isolatedServer(t, 'pooled', { ...POOL, LEASE_TTL_MS: '1000' })
  t.ok(await waitFor(async () => (await metricValue(dead.server.url, 'replcast_pool_sandboxes', { state: 'ready' })) === 2, 60000, 50))
  const deployment = dead.env.REPLCAST_DEPLOYMENT!
  const orphans = (await poolContainers(deployment)).map((c) => c.Id)
  t.equal(orphans.length, 2)
  await killHard(dead.server)
  t.equal((await poolContainers(deployment)).length, 2, 'a crash leaves them behind')
  await startApp(t, { REPLCAST_KEY_PREFIX: dead.env.REPLCAST_KEY_PREFIX!, REPLCAST_DEPLOYMENT: deployment, LEASE_TTL_MS: '1000' })
  t.ok(
    await waitFor(async () => (await poolContainers(deployment)).length === 0, 15000),
    "the other instance's sweep removes them once the dead one's heartbeat lapses",
  )
})

t.test('an image that exits at start: pool creation is bounded (two at a time, backing off), never a spin', async (t) => {
  // Passes the fast look at the image (its command runs replcast_repl) but has no Python: each sandbox exits at once.
  const image = await buildImage(t, 'no-python', 'FROM replcast-base:bookworm\nCMD ["python3", "-m", "replcast_repl"]\n')
  const h = await startApp(t, { SANDBOX_POOL_SIZE: '4', SANDBOX_IMAGE: image })
  const failures = () => metricValue(h.url, 'replcast_pool_create_failures_total')
  const at: number[] = []
  let most = 0
  const t0 = Date.now()
  const seen = await waitFor(
    async () => {
      most = Math.max(most, (await poolContainers(h.deployment)).length)
      const n = await failures()
      while (at.length < n) at.push(Date.now() - t0)
      return n >= 4
    },
    30000,
    20,
  )
  t.ok(seen, `four failures seen (${at.join(', ')} ms)`)
  t.ok(most <= 2, `never more than two made at once (${most})`)
  // At most one other create is under way when one fails, and none starts during the backoff
  // that follows the nth failure (2^(n-1) s): so the (n+2)th comes at least that long after it.
  t.ok(at[3]! - at[1]! >= 1800, `after the second failure the pool waits 2 s before the fourth (${at[3]! - at[1]!} ms)`)
  t.equal(await ready(h), 0)
  const r = await api(h.url, 'POST', '/v1/sessions', {})
  t.equal(r.status, 502, 'a session of that image is refused clearly')
  t.equal(r.body.code, 'template_unusable')
  t.match(r.body.detail, /template default's image does not run the replcast REPL/)
})

t.test('an image without the REPL: the pool makes no container at all, and says why', async (t) => {
  const h = await startApp(t, { SANDBOX_POOL_SIZE: '4', SANDBOX_IMAGE: 'replcast-base:bookworm' })
  t.ok(await waitFor(async () => (await metricValue(h.url, 'replcast_pool_create_failures_total')) >= 2, 30_000), 'failures counted')
  t.equal((await containersOf(h.deployment)).length, 0, 'not one container was made')
  const r = await api(h.url, 'POST', '/v1/sessions', {})
  t.equal(r.status, 502)
  t.equal(r.body.code, 'template_unusable')
  t.match(r.body.detail, /does not run the replcast REPL/)
})

t.test('a full host: the pool makes nothing and backs off', async (t) => {
  const memTotal = (await docker.info()).MemTotal as number
  // One default sandbox (512 MiB) is more than 5 % of a host under 10 GiB; above that, ask for more per sandbox.
  const mb = Math.max(512, Math.ceil((memTotal * 0.06) / 2 ** 20))
  const h = await startApp(t, { SANDBOX_POOL_SIZE: '2', HOST_MEMORY_SHARE: '0.05', SANDBOX_MEMORY_MB: String(mb), MAX_MEMORY_MB: String(mb) })
  t.ok(await waitFor(async () => (await metricValue(h.url, 'replcast_pool_create_failures_total')) >= 2, 30_000), 'refused for capacity')
  t.equal((await containersOf(h.deployment)).length, 0, 'no container')
  t.equal(await ready(h), 0)
})
