// Leases and their terms, in Redis alone (src/store/lease-store.ts, the fence in log-scripts.ts): a
// survivor takes the lease of an instance whose heartbeat is gone, never of one that came back; a
// lease that passes to another holder starts a new term; every write of the runner carries its term,
// and one of an earlier term is refused whole (LeaseLost), so an instance that lost a session while
// paused writes nothing more for it; a renewal keeps a lease only under its own term.
import t, { type Test } from 'tap'
import { randomBytes } from 'node:crypto'
import { Redis } from 'ioredis'
import { LeaseLost } from '../src/store/lease-store.js'
import { createStores, type Stores } from '../src/store/stores.js'
import { testEnv } from './helpers/app.js'

const TTL_MS = 60_000

function setUp(t: Test): { s: Stores; sid: string; eid: string } {
  const redis = new Redis(testEnv().REDIS_URL!)
  const prefix = `replcast-test-${randomBytes(4).toString('hex')}:`
  t.teardown(async () => {
    const keys = await redis.keys(`${prefix}*`)
    if (keys.length) await redis.del(...keys)
    redis.disconnect()
  })
  return { s: createStores(redis, { prefix, eventMaxLen: 1000, eventTtlS: 60 }), sid: `ses_${randomBytes(6).toString('hex')}`, eid: 'exe_1' }
}

/** What an instance's heartbeat says (src/cluster/directory.ts), for as long as it beats. */
const beat = (s: Stores, id: string) => s.redis.set(s.keys.instanceHeartbeat(id), 'x', 'PX', TTL_MS)

t.test('a survivor takes the lease of an instance that is gone, never of one that came back', async (t) => {
  const { s, sid } = setUp(t)
  const a = await s.leases.acquireLease(sid, 'A', TTL_MS)
  t.equal(a.holder, 'A')
  t.same(await s.leases.acquireLease(sid, 'A', TTL_MS), a, 'taken again by its holder: the same term')
  await beat(s, 'A')
  t.same(await s.leases.takeLease(sid, 'B', 'A', TTL_MS), { holder: 'A', term: '' }, 'A beats again: B, which found it gone before, takes nothing')
  t.equal(await s.leases.leaseHolder(sid), 'A')
  await s.redis.del(s.keys.instanceHeartbeat('A'))
  const b = await s.leases.takeLease(sid, 'B', 'A', TTL_MS)
  t.equal(b.holder, 'B', 'A gone: B takes the lease')
  t.ok(Number(b.term) > Number(a.term), 'under a new term')
  t.same(await s.leases.acquireLease(sid, 'A', TTL_MS), { holder: 'B', term: '' }, 'A, back, does not take it back')
  t.same(await s.leases.takeLease(sid, 'C', null, TTL_MS), { holder: 'B', term: '' }, 'nor does anyone while B holds it')
})

t.test('the writes of an earlier term are refused whole; those of the current term go through', async (t) => {
  const { s, sid, eid } = setUp(t)
  const tenant = 'alpha'
  await s.redis.hset(s.keys.session(sid), { id: sid, tenant, status: 'ready' })
  const a = await s.leases.acquireLease(sid, 'A', TTL_MS)
  const rec = {
    id: eid,
    session_id: sid,
    tenant,
    status: 'running',
    created_at: Date.now(),
    started_at: Date.now(),
    ended_at: null,
    duration_ms: null,
    execution_count: null,
  }
  const slot = { max: 10, untilMs: Date.now() + TTL_MS, idleDeadlineMs: Date.now() + TTL_MS }
  const started = await s.executions.startExecution(rec, { type: 'status', state: 'running' }, slot, a.term)
  t.equal(started.result, 'started', 'A starts an execution under its term')
  await s.logs.appendLiveMany(sid, eid, [{ type: 'stdout', text: 'one\n', pos: 2 }], tenant, 'plain', a.term)

  // A pauses; its heartbeat lapses; B takes the session over.
  const b = await s.leases.takeLease(sid, 'B', 'A', TTL_MS)
  t.equal(b.holder, 'B')
  const logged = async () => (await s.redis.xrange(s.keys.events(sid, eid), '-', '+')).map(([, [, json]]) => JSON.parse(json!).type as string)
  const before = await logged()
  await t.rejects(s.logs.appendLiveMany(sid, eid, [{ type: 'stdout', text: 'two\n', pos: 3 }], tenant, 'plain', a.term), LeaseLost, 'A, woken, appends nothing')
  await t.rejects(
    s.executions.recordEnd(sid, eid, tenant, { type: 'done', status: 'ok' }, { status: 'ok', ended_at: Date.now() }, null, [], '', a.term),
    LeaseLost,
    'nor ends the execution',
  )
  const next = { ...rec, id: 'exe_2', status: 'queued', started_at: null }
  t.same(await s.executions.startExecution(next, { type: 'status', state: 'queued' }, slot, a.term), { result: 'lost' }, 'nor starts another')
  t.same(await logged(), before, 'the log is as B found it')
  t.equal((await s.executions.getExecution(sid, eid))?.status, 'running', 'the execution is still running for B to resume')
  t.equal(await s.executions.getExecution(sid, 'exe_2'), null, 'and the refused one was not recorded')

  await s.logs.appendLiveMany(sid, eid, [{ type: 'stdout', text: 'two\n', pos: 3 }], tenant, 'plain', b.term)
  await s.executions.recordEnd(sid, eid, tenant, { type: 'done', status: 'ok' }, { status: 'ok', ended_at: Date.now() }, null, [], '', b.term)
  t.same(await logged(), [...before, 'stdout', 'done'], "B's writes go through")
  t.same(await s.logs.resumePoint(sid, eid), { pos: 3, seq: -1 }, 'and a resume would start after the last frame B stored')
})

t.test('a renewal keeps a lease only under its own term', async (t) => {
  const { s, sid } = setUp(t)
  const a = await s.leases.acquireLease(sid, 'A', TTL_MS)
  t.same(await s.leases.renewLeases([{ sid, term: a.term }], 'A', TTL_MS), [[sid, 'A']])
  // Redis was away longer than the lease: it lapsed, and nobody took it meanwhile.
  await s.redis.del(s.keys.lease(sid))
  t.same(await s.leases.renewLeases([{ sid, term: a.term }], 'A', TTL_MS), [[sid, 'A']], 'a lapsed lease nobody took is renewed')
  // A pauses; B takes the session over, and lets it go (it stops) before A wakes.
  const b = await s.leases.takeLease(sid, 'B', 'A', TTL_MS)
  t.same(await s.leases.renewLeases([{ sid, term: a.term }], 'A', TTL_MS), [[sid, 'B']], 'A finds B holding it')
  await s.leases.releaseLeases([sid], 'B')
  t.same(await s.leases.renewLeases([{ sid, term: a.term }], 'A', TTL_MS), [[sid, '']], 'free again, but not under the term A had: A lets it go')
  t.equal(await s.leases.leaseHolder(sid), null, 'and does not take it back by renewing')
  const again = await s.leases.acquireLease(sid, 'A', TTL_MS)
  t.ok(Number(again.term) > Number(b.term), 'adopted afresh, under a new term')
  t.same(await s.leases.renewLeases([{ sid, term: '' }], 'A', TTL_MS), [[sid, 'A']], 'a session being made is renewed whatever the term')
})
