// Fork on the real engine with runsc: each copy starts with the parent's state at that moment and
// is independent afterwards (a change in one is seen by no other, nor by the parent, which runs
// on); a fork that cannot make every copy (here the host's memory share) leaves none; the times of
// a fork of 1 and of 8 are printed.
import t from 'tap'
import Docker from 'dockerode'
import { readdirSync } from 'node:fs'
import { containersOf } from './helpers/app.js'
import { api, createSession, executeSse, stdoutOf } from './helpers/client.js'
import { startHibernationApp } from './helpers/hibernation.js'

const run = async (url: string, sid: string, code: string) => stdoutOf((await executeSse(url, sid, code)).events)
const STATE = "import json, os\nprint(json.dumps([x, open('/workspace/f.txt').read(), os.getcwd()]))"

t.test('fork', async (t) => {
  const h = await startHibernationApp(t)

  t.test('three copies, each with the state, none seeing another or the parent', async (t) => {
    const sid = await createSession(h.url, { limits: { memory_mb: 256 }, idle_action: 'hibernate', hibernated_ttl_s: 3600 })
    await run(h.url, sid, "import os\nx = 'parent'\nopen('/workspace/f.txt', 'w').write('parent')\nos.chdir('/tmp')")
    const r = await api(h.url, 'POST', `/v1/sessions/${sid}/fork`, { count: 3, metadata: { role: 'copy' }, idle_timeout_s: 120 })
    t.equal(r.status, 201, { body: r.body })
    const copies: string[] = r.body.sessions.map((s: { id: string }) => s.id)
    t.equal(new Set(copies).size, 3, 'three new sessions')
    t.notOk(copies.includes(sid))
    for (const s of r.body.sessions)
      t.match(s, {
        status: 'ready',
        runtime: 'runsc',
        metadata: { role: 'copy' },
        idle_timeout_s: 120,
        limits: { memory_mb: 256 },
        idle_action: 'hibernate',
        hibernated_ttl_s: 3600,
      })
    for (const c of copies) t.same(JSON.parse(await run(h.url, c, STATE)), ['parent', 'parent', '/tmp'], `${c} has the parent's state`)
    await Promise.all(copies.map((c, i) => run(h.url, c, `x = 'copy${i}'\nopen('/workspace/f.txt', 'w').write('copy${i}')`)))
    for (const [i, c] of copies.entries()) t.same(JSON.parse(await run(h.url, c, STATE)), [`copy${i}`, `copy${i}`, '/tmp'], `${c} sees its own change only`)
    t.same(JSON.parse(await run(h.url, sid, STATE)), ['parent', 'parent', '/tmp'], 'the parent is unchanged')
    await run(h.url, sid, "x = 'parent2'")
    t.same(JSON.parse(await run(h.url, copies[0]!, STATE))[0], 'copy0', "the parent's later change is not in a copy")
    t.equal((await containersOf(h.deployment)).length, 4, 'four containers: the parent and three copies')
    t.same(
      readdirSync(h.checkpointDir).filter((n) => n.startsWith('snp_')),
      [],
      "the fork's copy of the checkpoint is gone",
    )
    for (const c of [sid, ...copies]) await api(h.url, 'DELETE', `/v1/sessions/${c}`)
  })

  t.test('times: a fork of 1 (p50 of 3) and of 8', async (t) => {
    const sid = await createSession(h.url, { limits: { memory_mb: 128 } })
    await run(h.url, sid, 'y = 1')
    const ones: number[] = []
    for (let i = 0; i < 3; i++) {
      const t0 = performance.now()
      const r = await api(h.url, 'POST', `/v1/sessions/${sid}/fork`, {})
      ones.push(performance.now() - t0)
      t.equal(r.status, 201, { body: r.body })
      t.equal(r.body.sessions.length, 1)
      await api(h.url, 'DELETE', `/v1/sessions/${r.body.sessions[0].id}`)
    }
    const t0 = performance.now()
    const r = await api(h.url, 'POST', `/v1/sessions/${sid}/fork`, { count: 8 })
    const eight = performance.now() - t0
    t.equal(r.status, 201, { body: r.body })
    t.equal(r.body.sessions.length, 8)
    const outs = await Promise.all(r.body.sessions.map((s: { id: string }) => run(h.url, s.id, 'print(y)')))
    t.same(outs, Array(8).fill('1\n'), 'every copy of 8 answers with the state')
    ones.sort((a, b) => a - b)
    t.comment(`fork count 1: ${ones.map(Math.round).join(', ')} ms (p50 ${Math.round(ones[1]!)}); count 8: ${Math.round(eight)} ms`)
    for (const s of r.body.sessions) await api(h.url, 'DELETE', `/v1/sessions/${s.id}`)
    await api(h.url, 'DELETE', `/v1/sessions/${sid}`)
  })
})

t.test('a fork that cannot make every copy leaves none', async (t) => {
  const memTotal = (await new Docker().info()).MemTotal as number
  // Sandboxes of 31% of the host's memory in a 70% share: the parent and one copy fit, a second does not.
  const mb = Math.ceil((memTotal * 0.31) / 2 ** 20)
  const h = await startHibernationApp(t, { HOST_MEMORY_SHARE: '0.7', REPLCAST_TENANT_LIMITS: JSON.stringify({ alpha: { max_memory_mb: mb } }) })
  const sid = await createSession(h.url, { limits: { memory_mb: mb } })
  await run(h.url, sid, 'z = 3')
  const r = await api(h.url, 'POST', `/v1/sessions/${sid}/fork`, { count: 2 })
  t.equal(r.status, 503, 'the second copy finds no room')
  t.equal(r.body.code, 'capacity')
  const sessions = (await api(h.url, 'GET', '/v1/sessions')).body.sessions
  t.same(
    sessions.map((s: { id: string }) => s.id),
    [sid],
    'no copy is left',
  )
  t.equal((await containersOf(h.deployment)).length, 1, "only the parent's container")
  t.same(
    readdirSync(h.checkpointDir).filter((n) => n !== sid),
    [],
    'no checkpoint copy is left on disk',
  )
  t.equal(await run(h.url, sid, 'print(z)'), '3\n', 'the parent runs on with its state')
})
