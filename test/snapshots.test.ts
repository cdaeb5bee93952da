// Snapshots on the real engine with runsc: a new session from a snapshot has the session's state
// (globals, a function, a class instance, modules, a workspace file, cwd, env, execution_count)
// while the original runs on, and later changes leak neither way; the snapshot outlives its session,
// is owner-only on disk, is refused when tampered with (no session made, the snapshot kept), and
// DELETE removes its files; a busy session is 409, a runc one 409 not_supported.
import t from 'tap'
import { appendFileSync, existsSync, readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { api, createSession, executeSse, readSse, stdoutOf } from './helpers/client.js'
import { API_KEY } from './helpers/app.js'
import { startHibernationApp } from './helpers/hibernation.js'

const SETUP = `
import json, collections, os, sys
sys.path.insert(0, '/workspace')
open('/workspace/helper_mod.py', 'w').write('def triple(n):\\n    return 3 * n\\n')
import helper_mod
counter = 41
def bump(n):
    return n + 1
class Box:
    def __init__(self, v):
        self.v = v
box = Box('kept')
open('/workspace/data.txt', 'w').write('before')
os.makedirs('/workspace/sub', exist_ok=True)
os.chdir('/workspace/sub')
os.environ['SNAP_TEST'] = 'yes'
print('set')
`
const STATE = `print(json.dumps([counter, bump(1), box.v, helper_mod.triple(2), collections.Counter('aab')['a'],
  open('/workspace/data.txt').read(), os.getcwd(), os.environ.get('SNAP_TEST')]))`
const EXPECTED = [41, 2, 'kept', 6, 2, 'before', '/workspace/sub', 'yes']

const run = async (url: string, sid: string, code: string) => stdoutOf((await executeSse(url, sid, code)).events)

t.test('snapshots', async (t) => {
  const h = await startHibernationApp(t)

  t.test('a new session from a snapshot has the state; the original runs on; changes leak neither way', async (t) => {
    const sid = await createSession(h.url)
    t.equal((await run(h.url, sid, SETUP)).trim(), 'set')
    const t0 = performance.now()
    const r = await api(h.url, 'POST', `/v1/sessions/${sid}/snapshots`, { name: 'first' })
    const ms = performance.now() - t0
    t.equal(r.status, 201, 'snapshot answers 201', { body: r.body })
    t.match(r.body, { session_id: sid, name: 'first', runtime: 'runsc', template: 'default' })
    t.match(r.body.id, /^snp_/)
    t.ok(r.body.bytes > 0, 'bytes counted')
    t.comment(`snapshot request took ${Math.round(ms)} ms (the session's pause: a checkpoint and a restore)`)
    const snap = r.body
    const dir = join(h.checkpointDir, snap.id)
    t.equal(statSync(dir).mode & 0o777, 0o700, 'the snapshot folder is owner-only')
    for (const f of readdirSync(dir)) t.equal(statSync(join(dir, f)).mode & 0o777, 0o600, `${f} is owner-only`)
    t.same((await api(h.url, 'GET', `/v1/snapshots/${snap.id}`)).body, snap, 'GET shows it')
    t.equal((await api(h.url, 'GET', `/v1/sessions/${sid}`)).body.status, 'ready', 'the original is ready again')
    t.same(JSON.parse(await run(h.url, sid, STATE)), EXPECTED, 'the original kept its state')
    // The original changes after the snapshot: the copy must not see it.
    await run(h.url, sid, "counter = 1000\nopen('/workspace/data.txt', 'w').write('original after')")
    const c = await api(h.url, 'POST', '/v1/sessions', { snapshot_id: snap.id, metadata: { copy: 'yes' } })
    t.equal(c.status, 201, 'a session from the snapshot', { body: c.body })
    t.match(c.body, { status: 'ready', runtime: 'runsc', metadata: { copy: 'yes' } })
    t.not(c.body.id, sid, 'a new id')
    t.equal(c.body.execution_count, 1, "execution_count is the snapshot's (one execution before it)")
    const copy = c.body.id
    t.same(JSON.parse(await run(h.url, copy, STATE)), EXPECTED, "the new session has the snapshot's state")
    await run(h.url, copy, "counter = 7\nopen('/workspace/data.txt', 'w').write('copy after')")
    t.same(JSON.parse(await run(h.url, sid, STATE)).slice(0, 6), [1000, 2, 'kept', 6, 2, 'original after'], 'the copy changed nothing in the original')
    t.same(JSON.parse(await run(h.url, copy, STATE)).slice(0, 6), [7, 2, 'kept', 6, 2, 'copy after'], 'the copy has its own changes only')
    const m = await (await fetch(`${h.url}/metrics`)).text()
    t.match(m, /^replcast_snapshots [1-9]/m, '/metrics counts snapshots')
    t.match(m, /^replcast_snapshot_bytes [1-9]/m, "/metrics counts snapshots' bytes")

    t.equal((await api(h.url, 'DELETE', `/v1/sessions/${sid}`)).status, 204)
    t.equal((await api(h.url, 'GET', `/v1/snapshots/${snap.id}`)).status, 200, 'the snapshot outlives its session')
    const again = await api(h.url, 'POST', '/v1/sessions', { snapshot_id: snap.id })
    t.equal(again.status, 201, 'and still starts sessions')
    t.same(JSON.parse(await run(h.url, again.body.id, STATE)), EXPECTED)
    const list = await api(h.url, 'GET', '/v1/snapshots')
    t.ok(
      list.body.snapshots.some((s: { id: string }) => s.id === snap.id),
      'the list shows it',
    )
    t.equal((await api(h.url, 'DELETE', `/v1/snapshots/${snap.id}`)).status, 204)
    t.notOk(existsSync(dir), 'DELETE removed its files')
    t.equal((await api(h.url, 'GET', `/v1/snapshots/${snap.id}`)).status, 404)
    t.equal((await api(h.url, 'POST', '/v1/sessions', { snapshot_id: snap.id })).body.code, 'snapshot_not_found')
    t.same(JSON.parse(await run(h.url, again.body.id, STATE)), EXPECTED, 'sessions made from it run on without it')
  })

  t.test('a hibernated session is woken to be snapshotted; the list pages', async (t) => {
    const sid = await createSession(h.url)
    await run(h.url, sid, 'z = 99')
    t.equal((await api(h.url, 'POST', `/v1/sessions/${sid}/hibernate`)).body.status, 'hibernated')
    const ids: string[] = []
    for (let i = 0; i < 2; i++) {
      const r = await api(h.url, 'POST', `/v1/sessions/${sid}/snapshots`)
      t.equal(r.status, 201, { body: r.body })
      t.equal(r.body.name, '', 'no name given')
      ids.push(r.body.id)
    }
    t.equal((await api(h.url, 'GET', `/v1/sessions/${sid}`)).body.status, 'ready', 'the session is awake')
    const p1 = await api(h.url, 'GET', '/v1/snapshots?limit=1')
    t.equal(p1.body.snapshots.length, 1)
    t.ok(p1.body.next_cursor, 'a next page')
    const p2 = await api(h.url, 'GET', `/v1/snapshots?limit=200&cursor=${p1.body.next_cursor}`)
    const all = [...p1.body.snapshots, ...p2.body.snapshots].map((s: { id: string }) => s.id)
    t.same([...all].sort(), all, 'sorted by id')
    for (const id of ids) t.ok(all.includes(id), `${id} listed`)
    const c = await api(h.url, 'POST', '/v1/sessions', { snapshot_id: ids[0] })
    t.equal(await run(h.url, c.body.id, 'print(z)'), '99\n')
    const bad = await api(h.url, 'POST', '/v1/sessions', { snapshot_id: ids[0], runtime: 'runsc' })
    t.equal(bad.status, 400, 'runtime cannot be given with snapshot_id')
    t.equal(bad.body.code, 'bad_request')
  })

  t.test('a tampered snapshot is refused: no session is made, the snapshot is kept', async (t) => {
    const sid = await createSession(h.url)
    await run(h.url, sid, 'secret = 1')
    const snap = (await api(h.url, 'POST', `/v1/sessions/${sid}/snapshots`)).body
    const dir = join(h.checkpointDir, snap.id)
    for (const f of readdirSync(dir)) appendFileSync(join(dir, f), 'x')
    const before = (await api(h.url, 'GET', '/v1/sessions?limit=200')).body.sessions.length
    const r = await api(h.url, 'POST', '/v1/sessions', { snapshot_id: snap.id })
    t.equal(r.status, 409)
    t.equal(r.body.code, 'snapshot_refused')
    t.match(r.body.detail, /checksum/)
    t.equal((await api(h.url, 'GET', '/v1/sessions?limit=200')).body.sessions.length, before, 'no session was made')
    t.equal((await api(h.url, 'GET', `/v1/snapshots/${snap.id}`)).status, 200, 'the snapshot is kept')
    t.ok(existsSync(dir), 'its files are kept')
  })

  t.test('a busy session answers 409 session_busy; a runc session 409 not_supported', async (t) => {
    const sid = await createSession(h.url)
    const res = await fetch(`${h.url}/v1/sessions/${sid}/executions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ code: "import time\nprint('started', flush=True)\ntime.sleep(1.5)\nprint('finished')" }),
    })
    const reading = readSse(res, (e) => e.event === 'done')
    const r = await api(h.url, 'POST', `/v1/sessions/${sid}/snapshots`)
    t.equal(r.status, 409)
    t.equal(r.body.code, 'session_busy')
    t.equal(stdoutOf(await reading), 'started\nfinished\n', 'the execution was untouched')
    const runc = await createSession(h.url, { runtime: 'runc' })
    for (const path of ['snapshots', 'fork']) {
      const n = await api(h.url, 'POST', `/v1/sessions/${runc}/${path}`, {})
      t.equal(n.status, 409, `${path} of a runc session`)
      t.equal(n.body.code, 'not_supported')
      t.match(n.body.detail, /CRIU/)
    }
    t.equal(await run(h.url, runc, 'print(3)'), '3\n', 'the runc session runs on')
  })
})
