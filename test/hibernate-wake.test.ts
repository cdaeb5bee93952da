// Waking: one wake for many concurrent requests, background processes that run on across the
// hibernation, /metrics while hibernated, a restart that drops the checkpoint, and the quotas
// (hibernated sessions counted apart from max_sessions; waking needs room in max_sessions).
import t from 'tap'
import Docker from 'dockerode'
import { sandboxLabels } from '../src/sandbox/labels.js'
import { API_KEY, containersOf } from './helpers/app.js'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { api, createSession, executeSse, readSse, stdoutOf, untilStdout } from './helpers/client.js'
import { hibernate, startHibernationApp } from './helpers/hibernation.js'
import { metricValue } from './helpers/metrics.js'
import { outputOf, readOutput, startProcess } from './helpers/processes.js'
import { openPty, shellOutput } from './helpers/pty.js'
import { waitFor } from './helpers/wait.js'

t.test('waking', async (t) => {
  const h = await startHibernationApp(t)

  t.test('concurrent requests wake the session once, and each gets its answer', async (t) => {
    const sid = await createSession(h.url)
    await executeSse(h.url, sid, 'base = 100')
    await hibernate(t, h.url, sid)
    t.ok((await metricValue(h.url, 'replcast_hibernated_sessions')) >= 1, '/metrics counts the hibernated session')
    t.ok((await metricValue(h.url, 'replcast_checkpoint_bytes')) > 0, '/metrics counts its checkpoint bytes')
    const wakesBefore = await metricValue(h.url, 'replcast_session_wake_seconds_count')
    const runs = await Promise.all(Array.from({ length: 6 }, (_, i) => executeSse(h.url, sid, `print(base + ${i})`)))
    t.same(
      runs.map((r) => stdoutOf(r.events)),
      Array.from({ length: 6 }, (_, i) => `${100 + i}\n`),
    )
    t.equal((await metricValue(h.url, 'replcast_session_wake_seconds_count')) - wakesBefore, 1, 'one wake')
    t.equal(await metricValue(h.url, 'replcast_hibernated_sessions'), 0)
  })

  t.test('a background process runs on across hibernate and wake, its output whole', async (t) => {
    const sid = await createSession(h.url)
    const p = await startProcess(h.url, sid, { command: 'for i in $(seq 1 30); do echo tick $i; sleep 0.1; done' })
    await readSse(await outputOf(h.url, sid, p.id), untilStdout('tick 3\n'))
    await hibernate(t, h.url, sid)
    t.equal((await api(h.url, 'GET', `/v1/sessions/${sid}/processes/${p.id}`)).body.status, 'running', 'recorded as running while hibernated')
    t.equal((await api(h.url, 'POST', `/v1/sessions/${sid}/wake`)).body.status, 'ready')
    const events = await readOutput(h.url, sid, p.id)
    const text = events
      .filter((e) => e.event === 'stdout')
      .map((e) => e.data.text)
      .join('')
    t.equal(text, Array.from({ length: 30 }, (_, i) => `tick ${i + 1}\n`).join(''), 'every line once, in order')
    t.equal(events.at(-1)!.data.exit_code, 0, 'it exited by itself')
  })

  t.test('restart of a hibernated session gives a fresh interpreter and drops the checkpoint', async (t) => {
    const sid = await createSession(h.url)
    await executeSse(h.url, sid, 'gone = 1')
    await hibernate(t, h.url, sid)
    const r = await api(h.url, 'POST', `/v1/sessions/${sid}/restart`)
    t.equal(r.status, 200)
    t.equal(r.body.status, 'ready')
    t.equal(r.body.execution_count, 0)
    t.notOk(existsSync(join(h.checkpointDir, sid)), 'the checkpoint is gone')
    t.equal(stdoutOf((await executeSse(h.url, sid, "print('gone' in globals())")).events), 'False\n')
  })
})

t.test('hibernated sessions count in max_hibernated_sessions, not max_sessions', async (t) => {
  const h = await startHibernationApp(t, { REPLCAST_TENANT_LIMITS: JSON.stringify({ alpha: { max_sessions: 2, max_hibernated_sessions: 1 } }) })
  const [a, b] = [await createSession(h.url), await createSession(h.url)]
  await hibernate(t, h.url, a)
  const full = await api(h.url, 'POST', `/v1/sessions/${b}/hibernate`)
  t.equal(full.status, 429, 'a second hibernated session is over the limit')
  t.equal(full.body.code, 'quota_exceeded')
  t.equal(stdoutOf((await executeSse(h.url, b, 'print(3)')).events), '3\n', 'the refused session runs on')
  const c = await createSession(h.url)
  t.ok(c, 'the hibernated session left room for a new live one')
  const w = await api(h.url, 'POST', `/v1/sessions/${a}/wake`)
  t.equal(w.status, 429, 'waking needs room among the live sessions')
  t.equal(w.body.code, 'quota_exceeded')
  t.equal((await api(h.url, 'GET', `/v1/sessions/${a}`)).body.status, 'hibernated', 'still hibernated')
  t.equal((await api(h.url, 'GET', '/v1/sessions')).body.sessions.length, 3, 'the list shows all three')
  await api(h.url, 'DELETE', `/v1/sessions/${c}`)
  t.equal((await api(h.url, 'POST', `/v1/sessions/${a}/wake`)).body.status, 'ready')
})

t.test('files and a terminal wake it; a container left by a wake cut short is swept', async (t) => {
  const h = await startHibernationApp(t)
  const sid = await createSession(h.url)
  t.equal((await api(h.url, 'PUT', `/v1/sessions/${sid}/files/notes.txt`, 'kept on disk', { headers: { 'content-type': 'text/plain' } })).status, 201)
  await hibernate(t, h.url, sid)
  const r = await fetch(`${h.url}/v1/sessions/${sid}/files/notes.txt`, { headers: { authorization: `Bearer ${API_KEY}` } })
  t.equal(r.status, 200, 'reading a file wakes the session')
  t.equal(await r.text(), 'kept on disk')
  t.equal((await api(h.url, 'GET', `/v1/sessions/${sid}`)).body.status, 'ready')
  // A terminal wakes it too; a hibernation ends it (as a delete or a restart does), and waits for its
  // shell to be gone: a checkpoint holding the shell's host descriptors could not be restored.
  await hibernate(t, h.url, sid)
  const pty = await openPty(h.url, sid)
  t.equal((await shellOutput(pty, 'cat notes.txt')).trim(), 'kept on disk', 'a terminal wakes the session')
  await hibernate(t, h.url, sid)
  t.ok((await pty.closed).code, 'the terminal was closed by the hibernation')
  t.equal(stdoutOf((await executeSse(h.url, sid, "print(open('notes.txt').read())")).events), 'kept on disk\n', 'and the session wakes')
  // A crash between a restore's start and its record: a container under the session's name, the session still hibernated.
  await hibernate(t, h.url, sid)
  const docker = new Docker()
  const left = await docker.createContainer({
    name: `replcast-${sid}`,
    Image: h.config.SANDBOX_IMAGE,
    Labels: sandboxLabels(h.deployment, sid, 'alpha', 'gone', 1),
  })
  await h.restart()
  t.equal((await containersOf(h.deployment)).length, 0, 'the start-up sweep removed it')
  const woke = await executeSse(h.url, sid, 'print(6 * 7)')
  t.equal(stdoutOf(woke.events), '42\n', 'and the session wakes', { events: woke.events, session: (await api(h.url, 'GET', `/v1/sessions/${sid}`)).body })
  await docker
    .getContainer(left.id)
    .remove({ force: true })
    .catch(() => undefined)
})

t.test('a session that took a warm-pool sandbox hibernates and wakes like any other', async (t) => {
  const h = await startHibernationApp(t, { SANDBOX_POOL_SIZE: '1' })
  t.ok(await waitFor(async () => (await metricValue(h.url, 'replcast_pool_sandboxes', { state: 'ready' })) === 1, 30000), 'the pool is ready')
  const sid = await createSession(h.url)
  t.equal(await metricValue(h.url, 'replcast_pool_takes_total', { result: 'hit' }), 1, 'the session took the pooled sandbox')
  await executeSse(h.url, sid, "pooled = 'yes'")
  await hibernate(t, h.url, sid)
  t.equal(stdoutOf((await executeSse(h.url, sid, 'print(pooled)')).events), 'yes\n')
})
