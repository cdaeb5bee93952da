// The automatic path: a session with idle_action "hibernate" is hibernated at its idle deadline
// (keeping exactly what a manual hibernation keeps, a file written just before the deadline
// included) and deleted with its checkpoint after hibernated_ttl_s. Hibernated sessions survive an
// API restart and a Redis restart; checkpoints no session names are swept.
import t from 'tap'
import Docker from 'dockerode'
import { existsSync, mkdirSync, utimesSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { containersOf } from './helpers/app.js'
import { api, createSession, executeSse, stdoutOf } from './helpers/client.js'
import { startHibernationApp } from './helpers/hibernation.js'
import { startPrivateRedis } from './helpers/private-redis.js'
import { waitFor } from './helpers/wait.js'

const statusOf = async (url: string, sid: string) => (await api(url, 'GET', `/v1/sessions/${sid}`)).body?.status

t.test('idle sessions', async (t) => {
  const h = await startHibernationApp(t, { REAPER_INTERVAL_MS: '100' })

  t.test('at its idle deadline a hibernate session is hibernated, keeping a file written just before', async (t) => {
    const sid = await createSession(h.url, { idle_timeout_s: 2, idle_action: 'hibernate' })
    const s = (await api(h.url, 'GET', `/v1/sessions/${sid}`)).body
    t.equal(s.idle_action, 'hibernate')
    await executeSse(h.url, sid, "import os\nx = [1, 2, 3]\nos.chdir('/tmp')")
    // The last activity: the idle deadline is 2 s after it.
    await executeSse(h.url, sid, "open('/workspace/last.txt', 'w').write('just before')")
    t.ok(await waitFor(async () => (await statusOf(h.url, sid)) === 'hibernated', 30_000), 'hibernated by the reaper')
    t.ok(existsSync(join(h.checkpointDir, sid)), 'its checkpoint is on disk')
    const out = stdoutOf((await executeSse(h.url, sid, "print(x, open('/workspace/last.txt').read(), os.getcwd())")).events)
    t.equal(out, '[1, 2, 3] just before /tmp\n', 'woken on use with its state')
    t.equal(await statusOf(h.url, sid), 'ready')
    // Paused time does not count: the idle deadline starts again at the wake.
    const after = (await api(h.url, 'GET', `/v1/sessions/${sid}`)).body
    t.ok(Date.parse(after.expires_at) - Date.now() > 1000, 'a full idle period ahead after the wake')
  })

  t.test('a hibernated session is deleted with its checkpoint after hibernated_ttl_s', async (t) => {
    const sid = await createSession(h.url, { idle_timeout_s: 1, idle_action: 'hibernate', hibernated_ttl_s: 1 })
    t.ok(await waitFor(async () => (await statusOf(h.url, sid)) === 'hibernated', 30_000), 'hibernated')
    t.ok(await waitFor(async () => (await api(h.url, 'GET', `/v1/sessions/${sid}`)).status === 404, 30_000), 'then deleted')
    t.notOk(existsSync(join(h.checkpointDir, sid)), 'its checkpoint is gone')
  })

  t.test('a delete session is deleted at its deadline, not hibernated', async (t) => {
    const sid = await createSession(h.url, { idle_timeout_s: 1 })
    t.ok(await waitFor(async () => (await api(h.url, 'GET', `/v1/sessions/${sid}`)).status === 404, 30_000), 'deleted')
    t.notOk(existsSync(join(h.checkpointDir, sid)))
  })
})

t.test('a hibernated session survives an API restart; unnamed checkpoints are swept', async (t) => {
  const h = await startHibernationApp(t)
  const sid = await createSession(h.url)
  await executeSse(h.url, sid, "kept = 'across the restart'")
  t.equal((await api(h.url, 'POST', `/v1/sessions/${sid}/hibernate`)).body.status, 'hibernated')
  // Left over from a crash: a whole checkpoint no record names and a half-written one, both old.
  const old = new Date(Date.now() - 3600_000)
  for (const name of ['ses_nobodyknowsthis', `${sid}.part-dead`]) {
    mkdirSync(join(h.checkpointDir, name))
    writeFileSync(join(h.checkpointDir, name, 'checkpoint.img'), 'x')
    utimesSync(join(h.checkpointDir, name), old, old)
  }
  await h.restart()
  t.notOk(existsSync(join(h.checkpointDir, 'ses_nobodyknowsthis')), 'a checkpoint no session names is removed')
  t.notOk(existsSync(join(h.checkpointDir, `${sid}.part-dead`)), 'a half-written checkpoint is removed')
  t.ok(existsSync(join(h.checkpointDir, sid)), "the session's own checkpoint is kept")
  t.equal(await statusOf(h.url, sid), 'hibernated')
  t.equal(stdoutOf((await executeSse(h.url, sid, 'print(kept)')).events), 'across the restart\n')
})

t.test('a hibernated session survives a Redis restart (its record persisted, its checkpoint on disk)', async (t) => {
  const redis = await startPrivateRedis()
  t.teardown(() => redis.destroy())
  const h = await startHibernationApp(t, { REDIS_URL: redis.url })
  const sid = await createSession(h.url)
  await executeSse(h.url, sid, "kept = 'across Redis'")
  t.equal((await api(h.url, 'POST', `/v1/sessions/${sid}/hibernate`)).body.status, 'hibernated')
  await redis.stop()
  await redis.start()
  t.ok(await waitFor(async () => (await statusOf(h.url, sid)) === 'hibernated', 15000), 'still hibernated after the restart')
  t.equal(stdoutOf((await executeSse(h.url, sid, 'print(kept)')).events), 'across Redis\n')
})

t.test('an instance that stopped mid-checkpoint leaves the session dead, saying so', async (t) => {
  const h = await startHibernationApp(t)
  const sid = await createSession(h.url)
  // What a crash between `checkpoint create` (the container exits) and the record leaves behind.
  await h.stop()
  await h.redis.hset(`${h.prefix}{${sid}}:session`, 'hibernating_at', String(Date.now()))
  const [c] = await containersOf(h.deployment)
  await new Docker().getContainer(c!.Id).kill()
  await h.start()
  const s = (await api(h.url, 'GET', `/v1/sessions/${sid}`)).body
  t.equal(s.status, 'dead')
  t.match(s.status_detail, /while it was hibernating this session; its state was lost/)
})
