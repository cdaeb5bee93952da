// ExecutionLog (src/sessions/execution-log.ts) with a store that records or settles its writes: the
// output that arrives together leaves in one write, with the execution's end when that came with it;
// output that Redis has not stored yet is bounded per session. Past 2 MiB the sandbox's frames are
// held back (they wait on its side of the channel) until Redis has caught up to 512 KiB; a failed
// append counts as settled.
import t from 'tap'
import { pino } from 'pino'
import { loadConfig } from '../../src/config.js'
import type { ReplFrame } from '../../src/repl/protocol.js'
import { ReplClient } from '../../src/repl/repl-client.js'
import { ExecutionLog, type ExecutionLogDeps } from '../../src/sessions/execution-log.js'
import { newPendingExecution } from '../../src/sessions/execution.js'
import type { LiveSession } from '../../src/sessions/live-session.js'
import { createMetrics } from '../../src/sessions/metrics.js'
import { memoryTransportPair } from '../helpers/memory-transport.js'

const KIB = 1024

/** An ExecutionLog writing to `store`, and a live session on an in-memory REPL channel. */
function setup(store: ExecutionLogDeps['store'], outputBytes: number) {
  const { transport, repl } = memoryTransportPair()
  const silent = pino({ level: 'silent' })
  const client = new ReplClient(transport, silent, { readyTimeoutMs: 1000, expectReady: false })
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
    outputBytes,
    work: { queue: [], running: null, reserved: 0 },
  }
  return { events, live, client, transport, repl }
}

t.test("a session's frames wait while 2 MiB of its output is not stored yet, and come again once Redis has caught up", async (t) => {
  const appends: Array<{ stored: () => void; failed: () => void }> = []
  const pending = () =>
    new Promise<null>((resolve, reject) => appends.push({ stored: () => resolve(null), failed: () => reject(new Error('Redis went away')) }))
  const { events, live, client, transport, repl } = setup({ appendLive: pending, appendLiveMany: pending, recordEnd: async () => null }, 100 * 1024 * KIB)
  const ex = newPendingExecution('exe_1', '', 60_000)
  const seen: ReplFrame[] = []
  client.track('exe_2', (f) => seen.push(f))
  const settled = () => new Promise((r) => setImmediate(r))
  const text = 'x'.repeat(300 * KIB)

  // Each output in a task of its own: one append each.
  for (let i = 0; i < 6; i++) {
    events.output(live, ex, { type: 'stdout', text })
    await Promise.resolve()
  }
  t.equal(appends.length, 6)
  t.equal(transport.paused, false, '1.8 MiB not stored yet: frames still come')
  events.output(live, ex, { type: 'stdout', text })
  await Promise.resolve()
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

t.test('output that arrives together is stored in one write, and with the end when the end came with it', async (t) => {
  const writes: Array<{ kind: string; events: string[] }> = []
  const texts = (events: Array<{ text?: unknown; type: string }>) => events.map((e) => (typeof e.text === 'string' ? e.text : e.type))
  const store = {
    appendLive: async (_sid: string, _eid: string, e: { type: string; text?: unknown }) => (writes.push({ kind: 'append', events: texts([e]) }), null),
    appendLiveMany: async (_sid: string, _eid: string, events: Array<{ type: string; text?: unknown }>) => (
      writes.push({ kind: 'append', events: texts(events) }),
      null
    ),
    recordEnd: async (
      _sid: string,
      _eid: string,
      _tenant: string,
      done: { type: string } | null,
      _f: unknown,
      _s: unknown,
      before: Array<{ type: string; text?: unknown }> = [],
    ) => {
      writes.push({ kind: 'end', events: texts([...before, ...(done ? [done] : [])]) })
      return null
    },
  }
  const { events, live } = setup(store, 1024 * KIB)
  const ex = newPendingExecution('exe_1', '', 60_000)
  ex.startedAt = Date.now()

  events.output(live, ex, { type: 'stdout', text: 'a' })
  events.output(live, ex, { type: 'stderr', text: 'b' })
  events.output(live, ex, { type: 'stdout', text: 'c' })
  t.same(writes, [], 'nothing leaves while the task that got them runs')
  await Promise.resolve()
  t.same(writes, [{ kind: 'append', events: ['a', 'b', 'c'] }], 'then all three, in order, in one write')

  events.output(live, ex, { type: 'stdout', text: 'd' })
  const before = events.claim(ex)
  await Promise.resolve()
  t.equal(writes.length, 1, 'output claimed by the end does not leave on its own')
  await events.end(live, ex, 'ok', 1, { end: Date.now(), alive: true }, before)
  t.same(writes[1], { kind: 'end', events: ['d', 'done'] }, 'it goes with the end, before the done')

  const turn = newPendingExecution('exe_2', '', 60_000, 'execute', { logId: 'turn_1', tag: { step: 1 } })
  events.output(live, turn, { type: 'stdout', text: 'e' })
  t.same(writes[2], { kind: 'append', events: ['e'] }, "a log another writes too (an agent's turn) gets each event at once")
})
