// A fork across hosts: two API instances on one Redis, each on its own Docker engine that can
// checkpoint, sharing one CHECKPOINT_DIR. The instance that forks places the copies in turn on its
// engine and on the other (woken there by a signed call carrying the client's key): every copy has
// the parent's state and is independent. A copy that cannot be woken on the other engine (its
// instance reads another CHECKPOINT_DIR) fails the whole fork, and nothing is left on either engine
// nor on disk.
import t from 'tap'
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Docker from 'dockerode'
import { api, createSession, stdoutText } from './helpers/client.js'
import { checkpointEngineHost } from './helpers/hibernation.js'
import { startSecondEngine } from './helpers/second-engine.js'
import { processDeployment } from './helpers/deployment.js'

const SETUP = `
import os, numpy
arr = numpy.arange(10) * 3
counter = 41
os.makedirs('/workspace/sub', exist_ok=True)
open('/workspace/sub/note.txt', 'w').write('parent')
os.chdir('/workspace/sub')
print('set')
`
const READ = `import json
print(json.dumps([counter, int(arr.sum()), open('note.txt').read(), os.getcwd()]))`

t.test('a fork of 4 places copies on both engines, each with the state and independent; a copy failing elsewhere leaves nothing', async (t) => {
  const host1 = await checkpointEngineHost()
  const e2 = await startSecondEngine({ experimental: true })
  t.teardown(() => e2.stop())
  const e1 = new Docker()
  const e1id = ((await e1.info()) as { ID: string }).ID

  const shared = mkdtempSync(join(tmpdir(), 'rc-fork-hosts-'))
  t.teardown(() => rmSync(shared, { recursive: true, force: true }))
  const d = processDeployment(t)
  const { prefix, deployment, redis } = d
  const start = (name: string, dockerHost: string, share: string, checkpoints: string) =>
    d.start(name, { DOCKER_HOST: dockerHost, HOST_MEMORY_SHARE: share, SANDBOX_RUNTIME: 'runsc', CHECKPOINT_DIR: checkpoints })
  const store = join(shared, 'store')
  // Both engines have room; engine 1 the most, so the parent is made there.
  const [a, b] = await Promise.all([start('a', host1, '0.8', store), start('b', e2.host, '0.5', store)])
  const engineOf = (sid: string) => redis.hget(`${prefix}{${sid}}:session`, 'engine')
  const sessionsOn = async (docker: Docker) =>
    (await docker.listContainers({ all: true, filters: { label: [`replcast.deployment=${deployment}`] } })).map((c) => c.Labels['replcast.session']).sort()

  const parent = await createSession(a.url)
  t.equal(await engineOf(parent), e1id, 'the parent runs on engine 1')
  t.equal(stdoutText((await api(a.url, 'POST', `/v1/sessions/${parent}/executions`, { code: SETUP })).body.events), 'set\n')

  const fork = await api(a.url, 'POST', `/v1/sessions/${parent}/fork`, { count: 4 })
  t.equal(fork.status, 201, 'the fork answers 201', { body: fork.body })
  const copies: string[] = fork.body.sessions.map((s: { id: string }) => s.id)
  t.equal(copies.length, 4)
  t.ok(
    fork.body.sessions.every((s: { status: string }) => s.status === 'ready'),
    'every copy is ready',
  )
  const engines = await Promise.all(copies.map(engineOf))
  t.same(engines, [e1id, e2.id, e1id, e2.id], 'copies placed in turn on engine 1 and engine 2')
  t.same(await sessionsOn(e1), [parent, copies[0], copies[2]].sort(), "engine 1 runs the parent and two copies' containers")
  t.same(await sessionsOn(e2.docker), [copies[1], copies[3]].sort(), "engine 2 runs the other two copies' containers")

  // Each copy has the parent's state, through either instance.
  for (const [i, c] of copies.entries()) {
    const via = i % 2 ? b : a
    const r = await api(via.url, 'POST', `/v1/sessions/${c}/executions`, { code: READ })
    t.same(JSON.parse(stdoutText(r.body.events) || 'null'), [41, 135, 'parent', '/workspace/sub'], `copy ${i} has the parent's state`, { body: r.body })
  }
  // A change in one is seen by no other, nor by the parent.
  for (const [i, c] of copies.entries()) {
    const r = await api(a.url, 'POST', `/v1/sessions/${c}/executions`, { code: `counter = ${i}\nopen('note.txt', 'w').write('copy ${i}')` })
    t.equal(r.status, 200, `copy ${i} changed`)
  }
  for (const [i, c] of copies.entries()) {
    const r = await api(b.url, 'POST', `/v1/sessions/${c}/executions`, { code: READ })
    t.same(JSON.parse(stdoutText(r.body.events) || 'null'), [i, 135, `copy ${i}`, '/workspace/sub'], `copy ${i} sees only its own change`)
  }
  const p = await api(a.url, 'POST', `/v1/sessions/${parent}/executions`, { code: READ })
  t.same(JSON.parse(stdoutText(p.body.events) || 'null'), [41, 135, 'parent', '/workspace/sub'], 'the parent sees none of them')
  for (const c of copies) t.equal((await api(a.url, 'DELETE', `/v1/sessions/${c}`)).status, 204, `${c} deleted through engine 1's instance`)
  t.same(await sessionsOn(e2.docker), [], "the copies' containers are gone from engine 2")

  // Engine 2's instance replaced by one that reads another CHECKPOINT_DIR: a copy placed there cannot be woken.
  const exited = new Promise((r) => b.child.once('exit', r))
  b.child.kill('SIGTERM')
  await exited
  const elsewhere = join(shared, 'elsewhere')
  await start('c', e2.host, '0.5', elsewhere)
  const failed = await api(a.url, 'POST', `/v1/sessions/${parent}/fork`, { count: 2 })
  t.not(failed.status, 201, 'the fork fails', { body: failed.body })
  t.ok(String(failed.body.detail).includes(`engine ${e2.id}`), 'saying a copy on engine 2 failed', { body: failed.body })
  t.comment(`failed fork: ${failed.status} ${failed.body.code}: ${failed.body.detail}`)
  const left = (await api(a.url, 'GET', '/v1/sessions')).body.sessions.map((s: { id: string }) => s.id)
  t.same(left, [parent], 'no copy is left: only the parent remains')
  t.same(await sessionsOn(e1), [parent], 'no copy container on engine 1')
  t.same(await sessionsOn(e2.docker), [], 'no copy container on engine 2')
  t.same(existsSync(store) ? readdirSync(store) : [], [], 'no checkpoint folder is left in the shared CHECKPOINT_DIR')
  t.same(existsSync(elsewhere) ? readdirSync(elsewhere) : [], [], 'nor in the other instance’s')
  const still = await api(a.url, 'POST', `/v1/sessions/${parent}/executions`, { code: 'print(counter)' })
  t.equal(stdoutText(still.body.events), '41\n', 'the parent runs on')
})
