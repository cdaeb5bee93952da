// Host capacity: the memory limits of one Docker engine's sandboxes (every deployment's, from every
// API instance) may add up to HOST_MEMORY_SHARE of the host's memory; past it a new session is a
// 503 `capacity` with Retry-After. Sandboxes are the kernel OOM killer's first pick and dump no core.
import t from 'tap'
import Docker from 'dockerode'
import { containersOf, startApp } from './helpers/app.js'
import { api, createSession, executeSse, stdoutOf } from './helpers/client.js'

t.test('sessions past the host memory share are refused until one is freed', async (t) => {
  const memTotal = (await new Docker().info()).MemTotal as number
  // Two sandboxes of 31% of the host's memory do not fit in a 60% share whatever else runs on
  // the engine; one fits while the engine's other sandboxes (other tests') stay under 29%.
  const mb = Math.ceil((memTotal * 0.31) / 2 ** 20)
  const env = { HOST_MEMORY_SHARE: '0.6', REPLCAST_TENANT_LIMITS: JSON.stringify({ alpha: { max_memory_mb: mb } }) }
  const h1 = await startApp(t, env)
  // Another deployment with its own Redis keys: it shares nothing with h1 but the Docker engine.
  const h2 = await startApp(t, env)
  const big = { limits: { memory_mb: mb } }

  const first = await createSession(h1.url, big)

  const refused = await api(h1.url, 'POST', '/v1/sessions', big)
  t.equal(refused.status, 503)
  t.equal(refused.body.code, 'capacity')
  t.match(refused.headers.get('content-type'), /application\/problem\+json/)
  t.ok(Number(refused.headers.get('retry-after')) > 0, 'with Retry-After')
  t.match(refused.body.detail, /memory/)

  const elsewhere = await api(h2.url, 'POST', '/v1/sessions', big)
  t.equal(elsewhere.status, 503, "another deployment's instance counts the same engine's sandboxes")
  t.equal(elsewhere.body.code, 'capacity')

  const listed = await api(h1.url, 'GET', '/v1/sessions')
  t.same(
    listed.body.sessions.map((s: { id: string }) => s.id),
    [first],
    'a refused create leaves no session',
  )
  t.equal((await containersOf(h1.deployment)).length, 1, 'and no container')
  t.equal((await containersOf(h2.deployment)).length, 0)

  t.equal((await api(h1.url, 'DELETE', `/v1/sessions/${first}`)).status, 204)
  const next = await api(h2.url, 'POST', '/v1/sessions', big)
  t.equal(next.status, 201, 'freeing one lets the next in')
  t.equal((await api(h2.url, 'DELETE', `/v1/sessions/${next.body.id}`)).status, 204)

  // Room for one: four creates at once, two on each instance, each instance counting before any
  // sandbox exists. Each instance counts the engine again once its sandbox is made, so at most one
  // is admitted (near the limit, both may refuse; never both admit).
  const race = await Promise.all([h1, h1, h2, h2].map((h) => api(h.url, 'POST', '/v1/sessions', big)))
  const admitted = race.filter((r) => r.status === 201)
  t.ok(admitted.length <= 1, `at most one of four concurrent creates is admitted (${admitted.length})`)
  t.same(
    race.filter((r) => r.status !== 201).map((r) => r.body.code),
    Array(4 - admitted.length).fill('capacity'),
    'the others are refused for capacity',
  )
  const left = [...(await containersOf(h1.deployment)), ...(await containersOf(h2.deployment))]
  t.equal(left.length, admitted.length, 'refused creates leave no container')
})

t.test('a sandbox is the OOM killer’s first pick and cannot dump core', async (t) => {
  const h = await startApp(t)
  const sid = await createSession(h.url)
  const [c] = await containersOf(h.deployment)
  const info = await new Docker().getContainer(c!.Id).inspect()
  t.equal(info.HostConfig.OomScoreAdj, 1000)
  t.same(
    info.HostConfig.Ulimits?.find((u) => u.Name === 'core'),
    { Name: 'core', Soft: 0, Hard: 0 },
  )
  const code = [
    'import resource, subprocess',
    'print(open("/proc/self/oom_score_adj").read().strip())',
    'print(resource.getrlimit(resource.RLIMIT_CORE))',
    'print(subprocess.run(["sh", "-c", "ulimit -c; ulimit -Hc"], capture_output=True, text=True).stdout.split())',
    'try:',
    '    resource.setrlimit(resource.RLIMIT_CORE, (1 << 20, 1 << 20))',
    '    print("raised")',
    'except ValueError:',
    '    print("refused")',
  ].join('\n')
  const r = await executeSse(h.url, sid, code)
  t.equal(stdoutOf(r.events), "1000\n(0, 0)\n['0', '0']\nrefused\n")
})
