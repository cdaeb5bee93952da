// What hibernation refuses or ends: a busy session (409, its execution untouched), a runc session
// (409 not_supported), another tenant's session (404), a tampered checkpoint (the session dead with
// the reason, the checkpoint kept), a disk without room (507, the session runs on); DELETE removes
// the checkpoint; hibernating twice changes nothing.
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { appendFileSync, existsSync, mkdtempSync, readdirSync, rmSync, truncateSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { API_KEY, OTHER_KEY } from './helpers/app.js'
import { api, createSession, executeSse, readSse, stdoutOf } from './helpers/client.js'
import { hibernate, startHibernationApp } from './helpers/hibernation.js'

t.test('hibernation refusals and removals', async (t) => {
  const h = await startHibernationApp(t)
  const path = (sid: string) => `/v1/sessions/${sid}/hibernate`

  t.test('a busy session answers 409 session_busy and its execution goes on', async (t) => {
    const sid = await createSession(h.url)
    const res = await fetch(`${h.url}/v1/sessions/${sid}/executions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ code: "import time\nprint('started', flush=True)\ntime.sleep(1.5)\nprint('finished')" }),
    })
    const reading = readSse(res, (e) => e.event === 'done')
    const r = await api(h.url, 'POST', path(sid))
    t.equal(r.status, 409)
    t.equal(r.body.code, 'session_busy')
    const events = await reading
    t.equal(stdoutOf(events), 'started\nfinished\n', 'the execution was untouched')
    t.equal(events.at(-1)!.data.status, 'ok')
    t.equal((await api(h.url, 'GET', `/v1/sessions/${sid}`)).body.status, 'ready')
  })

  t.test('a runc session answers 409 not_supported saying why', async (t) => {
    const sid = await createSession(h.url, { runtime: 'runc' })
    const r = await api(h.url, 'POST', path(sid))
    t.equal(r.status, 409)
    t.equal(r.body.code, 'not_supported')
    t.match(r.body.detail, /CRIU/)
    t.equal(stdoutOf((await executeSse(h.url, sid, 'print(2)')).events), '2\n', 'the session runs on')
    const c = await api(h.url, 'POST', '/v1/sessions', { runtime: 'runc', idle_action: 'hibernate' })
    t.equal(c.status, 409, 'asking a runc session to hibernate when idle is refused at create')
    t.equal(c.body.code, 'not_supported')
  })

  t.test("another tenant's session is 404 for hibernate and wake; hibernating twice is a no-op", async (t) => {
    const sid = await createSession(h.url)
    for (const what of ['hibernate', 'wake']) {
      const r = await api(h.url, 'POST', `/v1/sessions/${sid}/${what}`, undefined, { key: OTHER_KEY })
      t.equal(r.status, 404, `${what} of another tenant's session`)
      t.equal(r.body.code, 'session_not_found')
    }
    const first = await hibernate(t, h.url, sid)
    const again = await hibernate(t, h.url, sid)
    t.equal(again.hibernated_at, first.hibernated_at, 'the second hibernate changed nothing')
    const other = await api(h.url, 'POST', `/v1/sessions/${sid}/executions`, { code: 'print(1)' }, { key: OTHER_KEY })
    t.equal(other.status, 404, "another tenant's execute does not wake it")
    t.equal((await api(h.url, 'GET', `/v1/sessions/${sid}`)).body.status, 'hibernated')
    const w = await api(h.url, 'POST', `/v1/sessions/${sid}/wake`)
    t.equal(w.status, 200)
    t.equal(w.body.status, 'ready')
    t.notOk(w.body.hibernated_at)
  })

  t.test('DELETE removes the session and its checkpoint from disk', async (t) => {
    const sid = await createSession(h.url)
    await hibernate(t, h.url, sid)
    t.ok(existsSync(join(h.checkpointDir, sid)), 'the checkpoint is on disk')
    t.equal((await api(h.url, 'DELETE', `/v1/sessions/${sid}`)).status, 204)
    t.notOk(existsSync(join(h.checkpointDir, sid)), 'the checkpoint is gone')
    t.equal((await api(h.url, 'GET', `/v1/sessions/${sid}`)).status, 404)
  })

  for (const [how, tamper] of [
    ['changed', (f: string) => appendFileSync(f, 'x')],
    ['truncated', (f: string) => truncateSync(f, 1000)],
  ] as const) {
    t.test(`a ${how} checkpoint is refused: the session is dead with the reason, the checkpoint kept`, async (t) => {
      const sid = await createSession(h.url)
      await executeSse(h.url, sid, 'secret = 1')
      await hibernate(t, h.url, sid)
      const dir = join(h.checkpointDir, sid)
      for (const f of readdirSync(dir)) tamper(join(dir, f))
      const r = await api(h.url, 'POST', `/v1/sessions/${sid}/executions`, { code: 'print(secret)' })
      t.equal(r.status, 409)
      t.equal(r.body.code, 'session_dead')
      t.match(r.body.detail, /checksum/)
      const s = (await api(h.url, 'GET', `/v1/sessions/${sid}`)).body
      t.equal(s.status, 'dead')
      t.match(s.status_detail, /checkpoint was refused/)
      t.ok(existsSync(dir), 'the checkpoint is kept')
      t.equal((await api(h.url, 'DELETE', `/v1/sessions/${sid}`)).status, 204)
      t.notOk(existsSync(dir), 'deleting the dead session removes it')
    })
  }
})

t.test('a disk without room for the checkpoint answers 507 checkpoint_space; the session runs on', async (t) => {
  // A 1 MiB filesystem for CHECKPOINT_DIR: a 512 MiB session's checkpoint may need up to 512 MiB.
  const small = mkdtempSync(join(tmpdir(), 'rc-small-'))
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m,mode=0700', 'tmpfs', small])
  t.teardown(() => {
    execFileSync('umount', [small])
    rmSync(small, { recursive: true, force: true })
  })
  const h = await startHibernationApp(t, { CHECKPOINT_DIR: join(small, 'store') })
  const sid = await createSession(h.url)
  await executeSse(h.url, sid, 'x = 5')
  const r = await api(h.url, 'POST', `/v1/sessions/${sid}/hibernate`)
  t.equal(r.status, 507)
  t.equal(r.body.code, 'checkpoint_space')
  t.match(r.body.detail, /needs 512 MiB free/)
  t.equal(stdoutOf((await executeSse(h.url, sid, 'print(x)')).events), '5\n', 'the session runs on with its state')
  t.equal((await api(h.url, 'GET', `/v1/sessions/${sid}`)).body.status, 'ready')
})
