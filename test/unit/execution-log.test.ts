// ExecutionLog (src/sessions/execution-log.ts) with a store whose appends the test settles: output
// that Redis has not stored yet is bounded per session. Past 2 MiB the sandbox's frames are held back
// (they wait on its side of the channel) until Redis has caught up to 512 KiB; a failed append
// counts as settled.
import t from 'tap'
import { pino } from 'pino'
import { loadConfig } from '../../src/config.js'
import type { ReplFrame } from '../../src/repl/protocol.js'
import { ReplClient } from '../../src/repl/repl-client.js'
import { ExecutionLog } from '../../src/sessions/execution-log.js'
import { newPendingExecution } from '../../src/sessions/execution.js'
import type { LiveSession } from '../../src/sessions/live-session.js'
import { createMetrics } from '../../src/sessions/metrics.js'
import { memoryTransportPair } from '../helpers/memory-transport.js'

const KIB = 1024

t.test("a session's frames wait while 2 MiB of its output is not stored yet, and come again once Redis has caught up", async (t) => {
  const { transport, repl } = memoryTransportPair()
  const silent = pino({ level: 'silent' })
  const client = new ReplClient(transport, silent, { readyTimeoutMs: 1000, expectReady: false })
  const appends: Array<{ stored: () => void; failed: () => void }> = []
  const store = {
    appendLive: () => new Promise<null>((resolve, reject) => appends.push({ stored: () => resolve(null), failed: () => reject(new Error('Redis went away')) })),
    recordEnd: async () => null,
  }
  const events = new ExecutionLog({
    config: loadConfig({ REPLCAST_API_KEYS: 't1=key-for-unit-tests' }),
    store,
    feed: { deliver: () => undefined },
    log: silent,
    metrics: createMetrics(),
  })
  const live: LiveSession = {
    id: 'ses_1',
    tenant: 't1',
    containerId: 'c1',
    client,
    state: 'attached',
    idleTimeoutS: 60,
    outputBytes: 100 * 1024 * KIB,
    work: { queue: [], running: null, reserved: 0 },
  }
  const ex = newPendingExecution('exe_1', '', 60_000)
  const seen: ReplFrame[] = []
  client.track('exe_2', (f) => seen.push(f))
  const settled = () => new Promise((r) => setImmediate(r))
  const text = 'x'.repeat(300 * KIB)

  for (let i = 0; i < 6; i++) events.output(live, ex, { type: 'stdout', text })
  t.equal(transport.paused, false, '1.8 MiB not stored yet: frames still come')
  events.output(live, ex, { type: 'stdout', text })
  t.equal(transport.paused, true, 'past 2 MiB: held back')
  repl.send({ type: 'stream', exec_id: 'exe_2', name: 'stdout', text: 'meanwhile' })
  t.same(seen, [], 'a frame sent meanwhile waits')

  for (const a of appends.slice(0, 4)) a.stored()
  appends[4]!.failed()
  await settled()
  t.equal(transport.paused, true, '600 KiB not settled: still held back')
  t.same(seen, [])
  appends[5]!.stored()
  await settled()
  t.equal(transport.paused, false, '300 KiB not settled: frames come again')
  t.same(
    seen.map((f) => (f as { text?: string }).text),
    ['meanwhile'],
    'the frame that waited arrives',
  )
  appends[6]!.stored()
})
