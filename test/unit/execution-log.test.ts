// ExecutionLog (src/sessions/runner/execution-log.ts) with a store that records or settles its writes: the
// output that arrives together leaves in one write, with the execution's end when that came with it;
// output that Redis has not stored yet is bounded (a session alone: 512 KiB, unstored-output.ts).
// Past it the sandbox's frames are held back (they wait on its side of the channel) until Redis has
// caught up to a quarter of it; a failed append counts as settled. An execution's end reaches its readers before Redis answers when every
// write before it was answered and kept.
import t from 'tap'
import { pino } from 'pino'
import { loadConfig } from '../../src/config.js'
import type { ReplFrame } from '../../src/repl/protocol.js'
import { ReplClient } from '../../src/repl/repl-client.js'
import { ExecutionLog, type ExecutionLogDeps } from '../../src/sessions/runner/execution-log.js'
import { newPendingExecution } from '../../src/sessions/runner/execution.js'
import type { LiveSession } from '../../src/sessions/runner/live-session.js'
import { createMetrics } from '../../src/metrics.js'
import { memoryTransportPair } from '../helpers/memory-transport.js'

const KIB = 1024

/** What the log writes to: its events (appendLive, appendLiveMany) and its end (recordEnd). */
type LogStore = ExecutionLogDeps['stores']['logs'] & ExecutionLogDeps['stores']['executions']

/** An ExecutionLog writing to `store`, and a live session on an in-memory REPL channel. */
function setup(store: LogStore, outputBytes: number) {
  const { transport, repl } = memoryTransportPair()
  const silent = pino({ level: 'silent' })
  const client = new ReplClient(transport, silent, { readyTimeoutMs: 1000, expectReady: false })
  const events = new ExecutionLog({
    config: loadConfig({ REPLCAST_API_KEYS: 't1=key-for-unit-tests' }),
    stores: { logs: store, executions: store },
    feed: { deliver: () => undefined },
    log: silent,
    metrics: createMetrics(),
  })
  const live: LiveSession = {
    id: 'ses_1',
    tenant: 't1',
    containerId: 'c1',
    term: '1',
    client,
    state: 'attached',
    idleTimeoutS: 60,
    outputBytes,
    work: { queue: [], running: null, reserved: 0 },
  }
  return { events, live, client, transport, repl }
}

t.test("a session's frames wait while 512 KiB of its output is not stored yet, and come again once Redis has caught up", async (t) => {
  const appends: Array<{ stored: () => void; failed: () => void }> = []
  const pending = () =>
    new Promise<null>((resolve, reject) => appends.push({ stored: () => resolve(null), failed: () => reject(new Error('Redis went away')) }))
  const { events, live, client, transport, repl } = setup({ appendLive: pending, appendLiveMany: pending, recordEnd: async () => null }, 100 * 1024 * KIB)
  const ex = newPendingExecution('exe_1', '', 60_000)
  const seen: ReplFrame[] = []
  client.track('exe_2', (f) => seen.push(f))
  const settled = () => new Promise((r) => setImmediate(r))
  const text = 'x'.repeat(100 * KIB)

  // Each output in a task of its own: one append each.
  for (let i = 0; i < 5; i++) {
    events.output(live, ex, { type: 'stdout', text })
    await Promise.resolve()
  }
  t.equal(appends.length, 5)
  t.equal(transport.paused, false, '500 KiB not stored yet: frames still come')
  events.output(live, ex, { type: 'stdout', text })
  await Promise.resolve()
  t.equal(transport.paused, true, 'past 512 KiB: held back')
  repl.send({ type: 'stream', exec_id: 'exe_2', name: 'stdout', text: 'meanwhile' })
  t.same(seen, [], 'a frame sent meanwhile waits')

  for (const a of appends.slice(0, 3)) a.stored()
  await settled()
  t.equal(transport.paused, true, '300 KiB not settled: still held back')
  t.same(seen, [])
  appends[3]!.stored()
  appends[4]!.failed()
  await settled()
  t.equal(transport.paused, false, '100 KiB not settled (a quarter of 512 KiB or less): frames come again')
  t.same(
    seen.map((f) => (f as { text?: string }).text),
    ['meanwhile'],
    'the frame that waited arrives',
  )
  appends[5]!.stored()
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

t.test(
  "output and ends are handed to readers when sent, under the ids that follow the log's last, while every write before them was answered and kept",
  async (t) => {
    type Added = { prev: string; events: Array<{ id: string; type: string }>; bytes: number; own: number }
    const appends: Array<{ ahead: boolean; reply: (a: Added | null) => void }> = []
    let ended: { expected: string; reply: (a: Added | null) => void } | null = null
    const store = {
      appendLive: async () => null,
      appendLiveMany: (...args: unknown[]) => new Promise<Added | null>((resolve) => appends.push({ ahead: args[4] === 'kept', reply: resolve })),
      recordEnd: (...args: unknown[]) =>
        new Promise<Added | null>((resolve) => {
          ended = { expected: args[7] as string, reply: resolve }
        }),
    }
    const delivered: string[][] = []
    const { live } = setup(store, 1024 * KIB)
    const events = new ExecutionLog({
      config: loadConfig({ REPLCAST_API_KEYS: 't1=key-for-unit-tests' }),
      stores: { logs: store, executions: store },
      feed: { deliver: (_sid, _eid, a) => void (a && delivered.push(a.events.map((e) => `${e.id} ${e.type}`))) },
      log: pino({ level: 'silent' }),
      metrics: createMetrics(),
    })
    const stored = (prev: string, ids: string[], own = ids.length): Added => ({ prev, events: ids.map((id) => ({ id, type: 'stdout' })), bytes: 10, own })
    const run = (id: string) => {
      const ex = newPendingExecution(id, '', 60_000)
      ex.startedAt = Date.now()
      events.started(live, ex, { prev: '', events: [{ id: '7-0', type: 'status' }], bytes: 10, own: 1 })
      delivered.length = 0
      return ex
    }
    const output = async (ex: ReturnType<typeof run>, text: string) => {
      events.output(live, ex, { type: 'stdout', text })
      await Promise.resolve()
      return appends.shift()!
    }
    const end = async (ex: ReturnType<typeof run>) => {
      events.output(live, ex, { type: 'stdout', text: 'last' })
      const ending = events.end(live, ex, 'ok', 1, { end: Date.now(), alive: true }, events.claim(ex))
      await Promise.resolve()
      return { ending }
    }

    const ex = run('exe_1')
    const a = await output(ex, 'a')
    t.equal(a.ahead, true, 'output appended ahead (kept whatever the budget)')
    t.same(delivered, [['7-1 stdout']], 'is handed over when sent, with the id after the status')
    a.reply(stored('7-0', ['7-1']))
    await Promise.resolve()
    const { ending } = await end(ex)
    t.equal(ended!.expected, '7-3', 'the end expects the ids after the last one stored')
    t.same(delivered.at(-1), ['7-2 stdout', '7-3 done'], 'and its readers have it before Redis answered')
    ended!.reply(stored('7-1', ['7-2', '7-3']))
    await ending

    const inFlight = run('exe_2')
    const large = await output(inFlight, 'x'.repeat(2 * KIB))
    t.equal(large.ahead, false, 'output over 1 KiB is held to the budget')
    t.same(delivered, [], 'and handed over once stored')
    const { ending: ending2 } = await end(inFlight)
    t.equal(ended!.expected, '', 'an append not answered yet: nothing is expected of the end')
    t.same(delivered, [], 'nor handed over before Redis answers')
    large.reply(null)
    ended!.reply(null)
    await ending2

    const refused = run('exe_3')
    ;(await output(refused, 'x'.repeat(2 * KIB))).reply(stored('7-0', ['7-1'], 0)) // a limit event instead: the budget refused it
    await Promise.resolve()
    t.equal((await output(refused, 'a')).ahead, false, 'after a refusal nothing goes ahead')
    const { ending: ending3 } = await end(refused)
    t.equal(ended!.expected, '', 'nor the end')
    ended!.reply(null)
    await ending3

    const chatty = run('exe_4')
    let aheadCount = 0
    for (let i = 1; i <= 40; i++) {
      const w = await output(chatty, 'y'.repeat(500))
      if (w.ahead) aheadCount++
      w.reply(stored(`7-${i - 1}`, [`7-${i}`]))
      await Promise.resolve()
    }
    t.ok(aheadCount >= 20 && aheadCount < 40, `an execution appends at most 16 KiB ahead (${aheadCount} of 40 writes of 500 bytes)`)
  },
)
