// What a session create from the warm pool and a one-shot wait for before their reply (issue 10's
// latency targets rest on it): no Docker engine call (placement with no other engine asks none, and
// the pool's refill starts after the reply), and the session's Redis writes in two round trips.
import t from 'tap'
import { API_KEY, startApp, type Harness } from './helpers/app.js'
import { api } from './helpers/client.js'
import { metricValue } from './helpers/metrics.js'
import { waitFor } from './helpers/wait.js'
import { groupsNaming, waitsOf, type Waits } from './helpers/waits.js'

// Leases renewed rarely: a renewal during a measured request would add a round trip naming its session.
const ENV = { SANDBOX_POOL_SIZE: '2', LEASE_TTL_MS: '60000' }

const poolFull = (h: Harness) => waitFor(async () => (await metricValue(h.url, 'replcast_pool_sandboxes', { state: 'ready' })) === 2, 60000, 50)

/** The groups of the session's own writes: those naming it up to its first execution's record. */
function sessionGroups(w: Waits, sid: string): number[] {
  const firstExecution = w.commands.find((c) => c.args.some((a) => a.includes(`{${sid}}:exec:`)))?.group ?? Infinity
  return groupsNaming(w, sid).filter((g) => g < firstExecution)
}

t.test('a session created from the pool waits for no Docker call, and is written in two Redis round trips', async (t) => {
  const h = await startApp(t, ENV)
  t.ok(await poolFull(h))
  // The first create looks at the image and the engine's runtimes once; those are kept.
  t.equal((await api(h.url, 'POST', '/v1/sessions', {})).status, 201)
  t.ok(await poolFull(h))
  let sid = ''
  const w = await waitsOf(h.redis, async () => {
    const res = await api(h.url, 'POST', '/v1/sessions', {})
    t.equal(res.status, 201)
    sid = res.body.id
  })
  t.same(w.docker, [], 'no Docker engine call before the reply (placement, the refill)')
  const groups = sessionGroups(w, sid)
  t.ok(groups.length >= 1 && groups.length <= 2, `the session's writes go in at most two round trips (${groups.length})`)
  t.equal(await metricValue(h.url, 'replcast_pool_takes_total', { result: 'hit' }), 2, 'it came from the pool')
  t.ok(await poolFull(h), 'and the pool refilled after the reply')
})

t.test('a one-shot waits for no Docker call, and writes its session in two Redis round trips', async (t) => {
  const h = await startApp(t, ENV)
  t.ok(await poolFull(h))
  t.equal((await api(h.url, 'POST', '/v1/execute', { code: 'print(1)' })).status, 200)
  t.ok(await poolFull(h))
  for (const sse of [false, true]) {
    const w = await waitsOf(h.redis, async () => {
      const res = await fetch(`${h.url}/v1/execute`, {
        method: 'POST',
        headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json', ...(sse ? { accept: 'text/event-stream' } : {}) },
        body: JSON.stringify({ code: 'print(1)' }),
      })
      t.match(await res.text(), sse ? /event: done/ : /"type":"done"/)
    })
    // The one-shot's own session (an SSE reply does not name it): the one whose record was created.
    const sid =
      /\{(ses_[^}]+)\}:session$/.exec(
        w.commands.find((c) => (c.name === 'eval' || c.name === 'evalsha') && /\{ses_[^}]+\}:session$/.test(c.args[2] ?? ''))?.args[2] ?? '',
      )?.[1] ?? ''
    const kind = sse ? 'SSE' : 'JSON'
    t.ok(sid, `${kind}: the one-shot's session was created`)
    t.same(w.docker, [], `${kind}: no Docker engine call before the reply (placement, the refill, the removal)`)
    const groups = sessionGroups(w, sid)
    t.ok(groups.length >= 1 && groups.length <= 2, `${kind}: the session's writes go in at most two round trips (${groups.length})`)
    const reads = w.commands.filter((c) => c.name === 'hgetall' && c.args[0]?.endsWith(`{${sid}}:session`)).length
    t.ok(reads <= 1, `${kind}: its session's record is not read back to run the code (${reads} reads)`)
    t.ok(await poolFull(h))
  }
})
