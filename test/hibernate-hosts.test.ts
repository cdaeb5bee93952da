// Several hosts with hibernation: two API instances on one Redis, each on its own Docker engine that
// can checkpoint, sharing one CHECKPOINT_DIR. While engine 1 has an instance, a session hibernated
// there wakes there, whichever instance the request reached; but it is not bound to engine 1:
// once no instance is left on engine 1, a request at engine 2's instance wakes it there, its
// checkpoint checked against the checksum kept in Redis (a changed one is refused there too), with
// its state, its id, and engine 2 recorded as its engine from then on.
import t from 'tap'
import { appendFileSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Docker from 'dockerode'
import { api, createSession, stdoutText } from './helpers/client.js'
import { checkpointEngineHost } from './helpers/hibernation.js'
import { startSecondEngine } from './helpers/second-engine.js'
import { killHard } from './helpers/server-process.js'
import { processDeployment } from './helpers/deployment.js'
import { waitFor } from './helpers/wait.js'

const SETUP = `
import os, numpy
arr = numpy.arange(10) * 3
def bump(n):
    return n + 1
counter = 41
os.makedirs('/workspace/sub', exist_ok=True)
open('/workspace/sub/note.txt', 'w').write('written on engine 1')
os.chdir('/workspace/sub')
os.environ['HOSTS_TEST'] = 'yes'
print('set')
`
const CHECK = `import json
print(json.dumps([bump(counter), int(arr.sum()), open('note.txt').read(), os.getcwd(), os.environ['HOSTS_TEST']]))`

t.test('a session hibernated on engine 1 wakes on engine 2 once engine 1 has no instance', async (t) => {
  const host1 = await checkpointEngineHost()
  const e2 = await startSecondEngine({ experimental: true })
  t.teardown(() => e2.stop())
  const e1 = new Docker()
  const e1id = ((await e1.info()) as { ID: string }).ID
  t.not(e2.id, e1id, 'each engine has an id of its own')

  const shared = mkdtempSync(join(tmpdir(), 'rc-hosts-cp-'))
  t.teardown(() => rmSync(shared, { recursive: true, force: true }))
  const d = processDeployment(t)
  const { prefix, deployment, redis } = d
  const start = (name: string, dockerHost: string, share: string) =>
    d.start(name, { DOCKER_HOST: dockerHost, HOST_MEMORY_SHARE: share, LEASE_TTL_MS: '3000', SANDBOX_RUNTIME: 'runsc', CHECKPOINT_DIR: join(shared, 'store') })
  // A on engine 1 with room, B on engine 2 made to look full: sessions are made on engine 1.
  const [a, b] = await Promise.all([start('a', host1, '0.8'), start('b', e2.host, '0.05')])
  const engineOf = (sid: string) => redis.hget(`${prefix}{${sid}}:session`, 'engine')
  const containersOn = (docker: Docker) => docker.listContainers({ all: true, filters: { label: [`replcast.deployment=${deployment}`] } })

  const sid = await createSession(a.url)
  const tampered = await createSession(a.url)
  const restarted = await createSession(a.url)
  t.equal(await engineOf(sid), e1id, 'the session runs on engine 1')
  const set = await api(a.url, 'POST', `/v1/sessions/${sid}/executions`, { code: SETUP })
  t.equal(stdoutText(set.body.events), 'set\n')
  await api(a.url, 'POST', `/v1/sessions/${tampered}/executions`, { code: 'x = 1' })
  await api(a.url, 'POST', `/v1/sessions/${restarted}/executions`, { code: 'y = 1' })
  for (const s of [sid, tampered, restarted]) {
    const r = await api(a.url, 'POST', `/v1/sessions/${s}/hibernate`)
    t.equal(r.body.status, 'hibernated', `${s} hibernated on engine 1`, { body: r.body })
  }
  t.equal((await containersOn(e1)).length, 0, 'no container is left on engine 1')
  // While engine 1 has an instance, the session stays there: a request at B is served by A, which wakes it.
  const viaB = await api(b.url, 'POST', `/v1/sessions/${sid}/executions`, { code: 'print(counter)' })
  t.equal(stdoutText(viaB.body.events), '41\n', 'a request at engine 2 runs the code', { body: viaB.body })
  t.equal(await engineOf(sid), e1id, 'woken on engine 1, its own, while an instance lives there')
  t.equal((await containersOn(e2.docker)).length, 0, 'nothing on engine 2')
  t.equal((await api(b.url, 'POST', `/v1/sessions/${sid}/hibernate`)).body.status, 'hibernated', 'hibernated again through B')
  // A changed checkpoint must be refused wherever it is restored.
  const dir = join(shared, 'store', tampered)
  for (const f of readdirSync(dir)) appendFileSync(join(dir, f), 'x')

  // Engine 1's only instance is gone: engine 2's instance takes the session once A's lease and report lapse.
  await killHard(a)
  let last: { status: number; body: any } = { status: 0, body: null }
  const woke = await waitFor(
    async () => {
      last = await api(b.url, 'POST', `/v1/sessions/${sid}/executions`, { code: CHECK })
      return last.status === 200
    },
    30000,
    250,
  )
  t.ok(woke, 'code runs through engine 2', { last })
  t.same(
    JSON.parse(stdoutText(last.body.events)),
    [42, 135, 'written on engine 1', '/workspace/sub', 'yes'],
    'globals, a function, numpy, a workspace file, cwd and env kept',
  )
  const rec = (await api(b.url, 'GET', `/v1/sessions/${sid}`)).body
  t.equal(rec.id, sid, 'the same session id')
  t.equal(rec.status, 'ready')
  t.equal(await engineOf(sid), e2.id, 'engine 2 is its engine now')
  const onE2 = await containersOn(e2.docker)
  t.same(
    onE2.map((c) => c.Labels['replcast.session']),
    [sid],
    'its sandbox runs on engine 2',
  )
  t.notOk(existsSync(join(shared, 'store', sid)), 'its checkpoint is gone once it is awake')
  const again = await api(b.url, 'POST', `/v1/sessions/${sid}/executions`, { code: 'counter = bump(counter)\nprint(counter)' })
  t.equal(stdoutText(again.body.events), '42\n', 'it goes on running code on engine 2')

  const refused = await api(b.url, 'POST', `/v1/sessions/${tampered}/executions`, { code: 'print(x)' })
  t.equal(refused.body.code, 'session_dead', 'the changed checkpoint is refused on engine 2', { body: refused.body })
  t.match(refused.body.detail, /checksum/, 'saying it does not match its checksum')
  t.equal((await api(b.url, 'GET', `/v1/sessions/${tampered}`)).body.status, 'dead', 'that session is dead')
  t.ok(existsSync(dir), 'and its checkpoint is kept')
  t.same(
    (await containersOn(e2.docker)).map((c) => c.Labels['replcast.session']),
    [sid],
    'no container of the refused restore is left on engine 2',
  )

  // A restart of a hibernated session whose engine has no instance left: a fresh sandbox on engine 2, which it then runs on.
  const r = await api(b.url, 'POST', `/v1/sessions/${restarted}/restart`)
  t.equal(r.status, 200, 'a hibernated session is restarted through engine 2', { body: r.body })
  t.equal(await engineOf(restarted), e2.id, 'engine 2 is its engine now')
  const fresh = await api(b.url, 'POST', `/v1/sessions/${restarted}/executions`, { code: "print(globals().get('y'))" })
  t.equal(stdoutText(fresh.body.events), 'None\n', 'and it runs code in a fresh interpreter', { body: fresh.body })
})
