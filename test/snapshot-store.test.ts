// The snapshot store's scripts, in Redis alone (src/store/snapshot-store.ts): a place is refused past
// max_snapshots or once the bytes reach max_snapshot_bytes; a record whose bytes would pass the
// maximum is not written; a delete gives its bytes back once, however often it is asked; expiries.
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { Redis } from 'ioredis'
import { createStores } from '../src/store/stores.js'
import type { SnapshotRecord } from '../src/store/snapshot-store.js'
import { testEnv } from './helpers/app.js'

const snap = (id: string, bytes: number, expires_at = Date.now() + 60_000): SnapshotRecord => ({
  id,
  tenant: 'alpha',
  session_id: 'ses_x',
  name: 'n',
  created_at: Date.now(),
  expires_at,
  bytes,
  execution_count: 3,
  digest: 'sha256:abc',
  runtime: 'runsc',
  template: 'default',
  limits: { memory_mb: 512, cpus: 1, pids: 256, workspace_mb: 100, output_bytes: 1000 },
  env: { A: 'b' },
  engine: 'e1',
})

t.test('snapshot quotas, records and expiries', async (t) => {
  const redis = new Redis(testEnv().REDIS_URL!)
  const prefix = `replcast-test-${randomBytes(4).toString('hex')}:`
  t.teardown(async () => {
    const keys = await redis.keys(`${prefix}*`)
    if (keys.length) await redis.del(...keys)
    redis.disconnect()
  })
  const s = createStores(redis, { prefix, eventMaxLen: 1000, eventTtlS: 60 }).snapshots
  t.equal(await s.reserve('alpha', 'snp_1', 2, 1000), 'ok')
  const first = snap('snp_1', 600)
  t.ok(await s.commit(first, 1000), 'recorded')
  t.same(await s.get('snp_1'), first, 'read back whole (numbers, limits and env as they were)')
  t.equal(await s.reserve('alpha', 'snp_2', 2, 1000), 'ok')
  t.notOk(await s.commit(snap('snp_2', 500), 1000), '600 + 500 passes 1000: not recorded')
  t.equal(await s.get('snp_2'), null)
  await s.cancel('alpha', 'snp_2')
  t.same(await s.tenantIds('alpha'), ['snp_1'], 'the cancelled place is given back')
  t.equal(await s.reserve('alpha', 'snp_3', 1, 1000), 'count', 'max_snapshots 1 reached')
  t.equal(await s.reserve('alpha', 'snp_3', 5, 600), 'bytes', 'the bytes are at the maximum already')
  t.equal(await s.reserve('beta', 'snp_4', 1, 600), 'ok', 'another tenant counts apart')
  t.same(await s.usage(), { snapshots: 1, bytes: 600 })
  t.same(await s.expired(Date.now()), [], 'nothing expired yet')
  t.same(await s.expired(Date.now() + 120_000), ['snp_1'], 'expired once its time has passed')
  t.ok(await s.delete({ id: 'snp_1', tenant: 'alpha' }))
  t.notOk(await s.delete({ id: 'snp_1', tenant: 'alpha' }), 'a second delete finds nothing')
  t.equal(await redis.get(`${prefix}tenant:alpha:snapshot-bytes`), '0', 'its bytes were given back once')
  t.same(await s.tenantIds('alpha'), [])
  t.same(await s.usage(), { snapshots: 0, bytes: 0 })
})
