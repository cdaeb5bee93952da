// What snapshots refuse and what removes them, on the real engine with runsc: another tenant's
// snapshot or session is 404 on every route; max_snapshots, max_snapshot_bytes and a fork over
// max_sessions answer 429 and leave nothing behind; an expired snapshot is deleted with its files;
// the sweep removes a snapshot folder no record names.
import t from 'tap'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { OTHER_KEY } from './helpers/app.js'
import { api, createSession, executeSse, stdoutOf } from './helpers/client.js'
import { startHibernationApp } from './helpers/hibernation.js'
import { waitFor } from './helpers/wait.js'

t.test("another tenant's snapshot or session is 404 on every route", async (t) => {
  const h = await startHibernationApp(t)
  const sid = await createSession(h.url)
  await executeSse(h.url, sid, 'mine = 1')
  const snap = (await api(h.url, 'POST', `/v1/sessions/${sid}/snapshots`)).body
  t.match(snap.id, /^snp_/)
  const other = { key: OTHER_KEY }
  for (const [method, path, body] of [
    ['POST', `/v1/sessions/${sid}/snapshots`, {}],
    ['POST', `/v1/sessions/${sid}/fork`, {}],
  ] as const) {
    const r = await api(h.url, method, path, body, other)
    t.equal(r.status, 404, `${method} ${path}`)
    t.equal(r.body.code, 'session_not_found')
  }
  for (const method of ['GET', 'DELETE'] as const) {
    const r = await api(h.url, method, `/v1/snapshots/${snap.id}`, undefined, other)
    t.equal(r.status, 404, `${method} of another tenant's snapshot`)
    t.equal(r.body.code, 'snapshot_not_found')
  }
  const c = await api(h.url, 'POST', '/v1/sessions', { snapshot_id: snap.id }, other)
  t.equal(c.status, 404, "a session from another tenant's snapshot")
  t.equal(c.body.code, 'snapshot_not_found')
  t.same((await api(h.url, 'GET', '/v1/snapshots', undefined, other)).body.snapshots, [], 'the other tenant lists none')
  t.same((await api(h.url, 'GET', '/v1/sessions', undefined, other)).body.sessions, [], 'and has no session')
  t.equal((await api(h.url, 'GET', `/v1/snapshots/${snap.id}`)).status, 200, 'the owner still has it')
})

t.test('quotas: max_snapshots, max_snapshot_bytes, a fork over max_sessions; nothing is left behind', async (t) => {
  const limits = { alpha: { max_snapshots: 1, max_sessions: 3 }, beta: { max_snapshot_bytes: 1048576 } }
  const h = await startHibernationApp(t, { REPLCAST_TENANT_LIMITS: JSON.stringify(limits) })
  const sid = await createSession(h.url)
  t.equal((await api(h.url, 'POST', `/v1/sessions/${sid}/snapshots`)).status, 201, 'the first snapshot')
  const second = await api(h.url, 'POST', `/v1/sessions/${sid}/snapshots`)
  t.equal(second.status, 429, 'max_snapshots 1: the second is refused')
  t.equal(second.body.code, 'quota_exceeded')
  t.match(second.body.detail, /1 snapshots/)
  t.equal((await api(h.url, 'GET', '/v1/snapshots')).body.snapshots.length, 1, 'one snapshot kept')

  // A checkpoint of an idle interpreter is a few MB: over beta's 1 MiB.
  const bsid = await createSession(h.url, {}, OTHER_KEY)
  const big = await api(h.url, 'POST', `/v1/sessions/${bsid}/snapshots`, {}, { key: OTHER_KEY })
  t.equal(big.status, 429, 'max_snapshot_bytes: refused once its size is known')
  t.equal(big.body.code, 'quota_exceeded')
  t.match(big.body.detail, /max_snapshot_bytes/)
  t.same((await api(h.url, 'GET', '/v1/snapshots', undefined, { key: OTHER_KEY })).body.snapshots, [], 'no snapshot recorded')
  t.equal(stdoutOf((await executeSse(h.url, bsid, 'print(5)', { key: OTHER_KEY })).events), '5\n', 'the session runs on')

  const fork = await api(h.url, 'POST', `/v1/sessions/${sid}/fork`, { count: 3 })
  t.equal(fork.status, 429, 'a fork of 3 beside 1 live session over max_sessions 3')
  t.equal(fork.body.code, 'quota_exceeded')
  t.equal((await api(h.url, 'GET', '/v1/sessions')).body.sessions.length, 1, 'no session was made')
  const snaps = readdirSync(h.checkpointDir).filter((n) => n.startsWith('snp_'))
  t.equal(snaps.length, 1, "only the first snapshot's folder is on disk")
})

t.test('an expired snapshot is deleted with its files; the sweep removes a folder no record names', async (t) => {
  const store = join(mkdtempSync(join(tmpdir(), 'rc-snapshots-')), 'store')
  t.teardown(() => rmSync(join(store, '..'), { recursive: true, force: true }))
  // An orphan: a snapshot folder without a record, older than the sweep's grace period.
  const orphan = join(store, 'snp_AAAAAAAAAAAAAAAAAAAA')
  mkdirSync(orphan, { recursive: true })
  writeFileSync(join(orphan, 'image'), 'x')
  const old = new Date(Date.now() - 3600_000)
  utimesSync(orphan, old, old)
  const h = await startHibernationApp(t, { CHECKPOINT_DIR: store, SNAPSHOT_TTL_S: '2', LEASE_TTL_MS: '1000' })
  t.ok(await waitFor(() => !existsSync(orphan), 30_000), 'the orphan folder was swept')
  const sid = await createSession(h.url)
  const snap = (await api(h.url, 'POST', `/v1/sessions/${sid}/snapshots`)).body
  t.ok(existsSync(join(h.checkpointDir, snap.id)), 'the snapshot is on disk')
  t.ok(await waitFor(async () => (await api(h.url, 'GET', `/v1/snapshots/${snap.id}`)).status === 404, 15_000), 'expired: gone')
  t.ok(await waitFor(() => !existsSync(join(h.checkpointDir, snap.id)), 30_000), 'its files are gone')
  t.equal((await api(h.url, 'GET', `/v1/sessions/${sid}`)).body.status, 'ready', 'its session is untouched')
})
