// /metrics: the gauges of checkpoints and snapshots read their source when scraped, once per scrape
// however many gauges show it, and a source that fails or never answers leaves the last values.
import t from 'tap'
import { createMetrics } from '../../src/metrics.js'

function gauge(text: string, name: string): number | undefined {
  const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text)
  return m ? Number(m[1]) : undefined
}

t.test('a scrape reads each source once, and both its gauges show that read', async (t) => {
  const metrics = createMetrics()
  let diskReads = 0
  let redisReads = 0
  metrics.checkpointUsage.read = async () => ({ checkpoints: ++diskReads, bytes: 1000 * diskReads })
  metrics.snapshotUsage.read = async () => ({ snapshots: ++redisReads, bytes: 7 * redisReads })

  const first = await metrics.registry.metrics()
  t.equal(diskReads, 1, 'the checkpoint folder was walked once')
  t.equal(redisReads, 1, 'Redis was asked once')
  t.equal(gauge(first, 'replcast_hibernated_sessions'), 1)
  t.equal(gauge(first, 'replcast_checkpoint_bytes'), 1000)
  t.equal(gauge(first, 'replcast_snapshots'), 1)
  t.equal(gauge(first, 'replcast_snapshot_bytes'), 7)

  const second = await metrics.registry.metrics()
  t.equal(diskReads, 2, 'the next scrape reads again')
  t.equal(gauge(second, 'replcast_checkpoint_bytes'), 2000)
  t.equal(gauge(second, 'replcast_snapshot_bytes'), 14)
})

t.test('a source that fails or never answers keeps the last values, and the scrape still answers', async (t) => {
  const metrics = createMetrics()
  metrics.checkpointUsage.read = async () => ({ checkpoints: 3, bytes: 300 })
  metrics.snapshotUsage.read = async () => ({ snapshots: 2, bytes: 20 })
  await metrics.registry.metrics()

  metrics.checkpointUsage.read = () => Promise.reject(new Error('EACCES'))
  let asked = 0
  metrics.snapshotUsage.read = () => {
    asked++
    return new Promise(() => {}) // Redis away
  }
  const text = await metrics.registry.metrics()
  t.equal(asked, 1, 'the hanging source was asked once for both its gauges')
  t.equal(gauge(text, 'replcast_hibernated_sessions'), 3)
  t.equal(gauge(text, 'replcast_checkpoint_bytes'), 300)
  t.equal(gauge(text, 'replcast_snapshots'), 2)
  t.equal(gauge(text, 'replcast_snapshot_bytes'), 20)

  await metrics.registry.metrics()
  t.equal(asked, 2, 'a late read is not waited on again: the next scrape asks anew')
})
