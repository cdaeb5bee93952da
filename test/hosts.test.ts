// Several hosts: API instances on two Docker engines (the machine's and a second dockerd) share one
// Redis. A create goes to the engine with the most free capacity whichever instance received it;
// code runs through any instance; a session is taken over only by an instance on its own engine,
// and when none is left there it ends saying so (its running execution with one `done`); an engine's
// leftovers are removed by its own instances, so no container is left on either engine.
import t from 'tap'
import Docker from 'dockerode'
import { API_KEY } from './helpers/app.js'
import { api, createSession, readSse, stdoutOf, stdoutText, untilStdout } from './helpers/client.js'
import { startSecondEngine } from './helpers/second-engine.js'
import { killHard, type ServerProcess } from './helpers/server-process.js'
import { processDeployment } from './helpers/deployment.js'
import { waitFor } from './helpers/wait.js'

const auth = { authorization: `Bearer ${API_KEY}` }

t.test('two Docker engines on one Redis', async (t) => {
  const e2 = await startSecondEngine()
  t.teardown(() => e2.stop())
  const e1 = new Docker()
  const e1id = ((await e1.info()) as { ID: string }).ID
  t.not(e2.id, e1id, 'each engine has an id of its own')

  const d = processDeployment(t)
  const { tag, prefix, deployment, redis, servers } = d
  const start = (name: string, dockerHost: string, share: string, extra: Record<string, string> = {}) =>
    d.start(name, { DOCKER_HOST: dockerHost, HOST_MEMORY_SHARE: share, LEASE_TTL_MS: '3000', ...extra })
  // A on engine 1, made to look full (5% of the host's memory, which other sandboxes on it may fill);
  // B and C on engine 2, B with a warm pool (whose bindings engine 1's sweeps must leave alone).
  const [a, b, c] = await Promise.all([start('a', '', '0.05'), start('b', e2.host, '0.8', { SANDBOX_POOL_SIZE: '1' }), start('c', e2.host, '0.8')])
  const idOf = (s: ServerProcess) => [...servers].find(([, v]) => v === s)![0] + `-${tag}`
  const engineOf = async (sid: string) => redis.hget(`${prefix}{${sid}}:session`, 'engine')
  const holderOf = async (sid: string) => redis.get(`${prefix}{${sid}}:lease`)
  const bindings = async () => redis.hgetall(`${prefix}pool-bindings`)
  /** The deployment's sandboxes on an engine that serve (or served) a session: a pool's unbound ones are not counted. */
  const on = async (docker: Docker) => {
    const bound = new Set(Object.keys(await bindings()))
    const list = await docker.listContainers({ all: true, filters: { label: [`replcast.deployment=${deployment}`] } })
    return list.filter((x) => x.Labels['replcast.pool'] !== 'true' || bound.has(x.Id))
  }
  const poolReady = async (s: ServerProcess) => /replcast_pool_sandboxes\{state="ready"\} 1/.test(await (await fetch(`${s.url}/metrics`)).text())

  // Placement: the engine with the most free capacity, whichever instance received the create.
  t.ok(await waitFor(() => poolReady(b), 30000, 100), "B's warm pool is ready")
  const s2 = await createSession(b.url)
  t.ok(Object.values(await bindings()).includes(s2), 'a create received on engine 2 stayed there, from its warm pool')
  const s1 = await createSession(a.url)
  t.equal(await engineOf(s1), e2.id, 'a create received on engine 1 went to engine 2, which has more room')
  t.equal(await engineOf(s2), e2.id, 'and it records its engine')
  t.equal((await on(e2.docker)).length, 2, 'both sandboxes are on engine 2')
  t.equal((await on(e1)).length, 0, 'none on engine 1')
  const one = await api(a.url, 'POST', '/v1/execute', { code: 'print(6 * 7)' })
  t.equal(one.status, 200, 'a one-shot received on engine 1')
  t.equal(stdoutText(one.body.events), '42\n')
  t.equal((await on(e1)).length, 0, 'ran on engine 2')
  // Its session goes once the reply is over (removing a sandbox takes a moment): before any instance is killed below.
  const oneShot = one.body.session_id as string
  t.ok(await waitFor(async () => (await redis.exists(`${prefix}{${oneShot}}:session`)) === 0, 15000), "the one-shot's session is removed after its reply")

  // Code runs through every instance, in one namespace.
  for (const s of [a, b, c, a]) {
    const r = await api(s.url, 'POST', `/v1/sessions/${s1}/executions`, { code: 'n = globals().get("n", 0) + 1\nprint(n)' })
    t.equal(r.status, 200, `execute through ${idOf(s)}`)
  }
  const n = await api(c.url, 'POST', `/v1/sessions/${s1}/executions`, { code: 'print(n)' })
  t.equal(stdoutText(n.body.events), '4\n', 'every execution ran in the same namespace')

  // The holder dies: only the other instance on engine 2 may take the session over, never A.
  const first = await holderOf(s1)
  t.ok(first === idOf(b) || first === idOf(c), 'an instance on engine 2 holds the session')
  const [dying, survivor] = first === idOf(b) ? [b, c] : [c, b]
  const seen = new Set<string>()
  await killHard(dying)
  servers.delete(first!.replace(`-${tag}`, ''))
  const killedAt = Date.now()
  t.ok(
    await waitFor(async () => {
      const h = await holderOf(s1)
      if (h) seen.add(h)
      return h === idOf(survivor)
    }, 15000),
    'the instance left on engine 2 took the session over',
  )
  t.comment(`taken over ${Date.now() - killedAt} ms after the SIGKILL`)
  t.notOk(seen.has(idOf(a)), 'the instance on engine 1 never held it')
  const after = await api(a.url, 'POST', `/v1/sessions/${s1}/executions`, { code: 'print(n)' })
  t.equal(after.status, 200, 'code runs through engine 1 again')
  t.equal(stdoutText(after.body.events), '4\n', 'with the namespace kept')
  // Several sweeps of engine 1 ran meanwhile (every LEASE_TTL_MS): the pooled sandbox's binding stands.
  t.ok(Object.values(await bindings()).includes(s2), "engine 1's sweeps left engine 2's pool binding alone")
  const pooled = await api(a.url, 'POST', `/v1/sessions/${s2}/executions`, { code: 'print("alive")' })
  t.equal(stdoutText(pooled.body.events), 'alive\n', 'and its session runs code')

  // The last instance on engine 2 dies during an execution: the session ends, saying why, with one done.
  const res = await fetch(`${a.url}/v1/sessions/${s1}/executions`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({ code: 'import time\nprint("go", flush=True)\ntime.sleep(60)', timeout_s: 120 }),
  })
  const started = await readSse(res, untilStdout('go\n'))
  t.equal(stdoutOf(started), 'go\n', 'an execution runs')
  const eid = res.headers.get('location')!.split('/').pop()!
  await killHard(survivor)
  servers.delete(idOf(survivor).replace(`-${tag}`, ''))
  const rest = await readSse(
    await fetch(`${a.url}/v1/sessions/${s1}/executions/${eid}/events`, {
      headers: { ...auth, accept: 'text/event-stream', 'last-event-id': started.at(-1)!.id },
      signal: AbortSignal.timeout(30000),
    }),
  )
  const dones = rest.filter((e) => e.event === 'done')
  t.equal(dones.length, 1, 'its follower on engine 1 gets one done')
  t.equal(dones[0]?.data.status, 'killed')
  t.match(rest.find((e) => e.event === 'error')?.data.evalue, /no API instance on that engine/, 'after an error saying why')
  const dead = await api(a.url, 'GET', `/v1/sessions/${s1}`)
  t.equal(dead.body.status, 'dead', 'the session is dead')
  t.match(dead.body.status_detail, new RegExp(`Docker engine ${e2.id}.*no API instance`), 'and says why')
  const refused = await api(a.url, 'POST', `/v1/sessions/${s1}/executions`, { code: 'print(1)' })
  t.equal(refused.body.code, 'session_dead', 'code is refused with the same reason')
  t.match(refused.body.detail, /no API instance on that engine/)
  t.ok(await waitFor(async () => (await api(a.url, 'GET', `/v1/sessions/${s2}`)).body.status === 'dead', 15000), 'its idle session ends too')

  // Deleted through engine 1: their sandboxes stay on engine 2 until an instance runs there again, which removes them.
  for (const sid of [s1, s2]) t.equal((await api(a.url, 'DELETE', `/v1/sessions/${sid}`)).status, 204)
  t.equal((await on(e2.docker)).length, 2, 'engine 1 does not touch engine 2')
  await start('b', e2.host, '0.8')
  t.ok(await waitFor(async () => (await on(e2.docker)).length === 0, 15000), 'an instance starting on engine 2 removes them')
  t.equal((await on(e1)).length, 0, 'nothing on engine 1 either')
  const left = await redis.keys(`${prefix}{ses_*}:session`)
  t.same(left, [], 'no session is left in Redis', { records: await Promise.all(left.map((k) => redis.hgetall(k))), s1, s2 })
})
