// ExecutionRunner without Docker or Redis: a fake REPL over an in-memory transport and an
// in-memory store. Order of executions and events, exactly one `done`, the host's byte budget,
// timeouts that interrupt and then kill, quotas, a streamed step logging into another log, and a
// session whose lease passed to another instance (its writes refused) let go at once.
import t, { type Test } from 'tap'
import { pino } from 'pino'
import { loadConfig, type Config } from '../../src/config.js'
import { ReplClient } from '../../src/repl/repl-client.js'
import { ExecutionRunner, type RunnerStores } from '../../src/sessions/runner/execution-runner.js'
import { newPendingExecution, type PendingExecution } from '../../src/sessions/runner/execution.js'
import type { LiveSession } from '../../src/sessions/runner/live-session.js'
import { createMetrics } from '../../src/metrics.js'
import { LeaseLost } from '../../src/store/lease-store.js'
import type { DoneStatusT } from '../../src/schemas.js'
import { memoryTransportPair, type FakeRepl } from '../helpers/memory-transport.js'
import { eventJson } from '../../src/event-json.js'

type Logged = { type: string; [k: string]: unknown }

type RunnerStore = RunnerStores['executions'] & RunnerStores['logs'] & RunnerStores['quotas']

/** The runner's stores in memory, as one: records, one event list per log, the tenant's execution slots. */
class MemoryStore implements RunnerStore {
  readonly logs = new Map<string, Logged[]>()
  readonly records = new Map<string, Record<string, unknown>>()
  readonly slots = new Set<string>()
  /** Another instance took the session's lease: Redis refuses the runner's writes under its term. */
  lost = false
  constructor(private readonly maxSlots = 100) {}

  log(id: string): Logged[] {
    return this.logs.get(id) ?? []
  }
  /** Keeps what Redis would: the event's JSON, as the store writes it. */
  private push(id: string, e: object): void {
    this.logs.set(id, [...this.log(id), JSON.parse(eventJson(e)) as Logged])
  }

  async acquireRunningSlot(_tenant: string, eid: string): Promise<boolean> {
    if (this.slots.size >= this.maxSlots) return false
    this.slots.add(eid)
    return true
  }
  async startExecution(rec: { id: string }, first: object | null): Promise<{ result: 'started'; added: null } | { result: 'no_slot' | 'lost' }> {
    if (this.lost) return { result: 'lost' }
    if (!(await this.acquireRunningSlot('', rec.id))) return { result: 'no_slot' }
    await this.createExecution(rec, first)
    return { result: 'started', added: null }
  }
  async releaseRunningSlot(_tenant: string, eid: string): Promise<void> {
    this.slots.delete(eid)
  }
  private async createExecution(rec: { id: string }, first: object | null): Promise<void> {
    this.records.set(rec.id, { ...rec })
    if (first) this.push(rec.id, first)
  }
  async recordStart(_sid: string, eid: string, startedAt: number, status: object | null): Promise<null> {
    Object.assign(this.records.get(eid) ?? {}, { status: 'running', started_at: startedAt })
    if (status) this.push(eid, status)
    return null
  }
  async recordEnd(sid: string, eid: string, _tenant: string, done: object | null, fields: object, _session: unknown, before: Logged[] = []): Promise<null> {
    if (this.lost) throw new LeaseLost(sid)
    for (const e of before) this.push(eid, e)
    if (done) this.push(eid, done)
    Object.assign(this.records.get(eid) ?? {}, fields)
    this.slots.delete(eid)
    return null
  }
  async appendLive(_sid: string, logId: string, e: Logged): Promise<null> {
    this.push(logId, e)
    return null
  }
  async appendLiveMany(sid: string, logId: string, events: Logged[]): Promise<null> {
    if (this.lost) throw new LeaseLost(sid)
    for (const e of events) this.push(logId, e)
    return null
  }
  async resumePoint(): Promise<{ pos: number; seq: number }> {
    return { pos: 0, seq: -1 }
  }
}

interface Harness {
  runner: ExecutionRunner
  live: LiveSession
  repl: FakeRepl
  store: MemoryStore
  killed: string[]
  nextKill: () => Promise<string>
  /** Why the runner let go of the session, each time it did (the session is then released, as Adoption.letGo does). */
  letGo: string[]
}

function setup(t: Test, opts: { config?: Record<string, string>; outputBytes?: number; maxSlots?: number } = {}): Harness {
  const config: Config = loadConfig({ REPLCAST_API_KEYS: 't1=key-for-unit-tests', INTERRUPT_GRACE_MS: '50', ...opts.config })
  const store = new MemoryStore(opts.maxSlots)
  const killed: string[] = []
  let onKill: ((id: string) => void) | null = null
  const nextKill = () =>
    new Promise<string>((resolve) => {
      onKill = resolve
    })
  const { transport, repl } = memoryTransportPair()
  const log = pino({ level: 'silent' })
  const client = new ReplClient(transport, log, { readyTimeoutMs: 1000, expectReady: false })
  const live: LiveSession = {
    id: 'ses_1',
    tenant: 't1',
    containerId: 'c1',
    term: '1',
    client,
    state: 'attached',
    idleTimeoutS: 60,
    outputBytes: opts.outputBytes ?? 1_000_000,
    work: { queue: [], running: null, reserved: 0 },
  }
  const letGo: string[] = []
  const runner: ExecutionRunner = new ExecutionRunner({
    letGo: (l, why) => {
      letGo.push(why)
      l.state = 'released'
      runner.abandon(l)
    },
    config,
    stores: { executions: store, logs: store, quotas: store },
    log,
    metrics: createMetrics(),
    feed: { deliver: () => undefined },
    driver: {
      kill: async (id: string) => {
        killed.push(id)
        onKill?.(id)
      },
      readStdoutLog: async () => Buffer.alloc(0),
    },
  })
  // The runner's timers are unref'd; this keeps the test process up while a test awaits them.
  const keepAlive = setInterval(() => undefined, 60_000)
  t.teardown(() => {
    clearInterval(keepAlive)
    runner.abandon(live)
    client.close()
  })
  return { runner, live, repl, store, killed, nextKill, letGo }
}

/** An execution whose `done` status the test can await. */
function execution(id: string, code: string, timeoutMs = 60_000): { ex: PendingExecution; done: Promise<DoneStatusT> } {
  const ex = newPendingExecution(id, code, timeoutMs)
  const done = new Promise<DoneStatusT>((resolve) => {
    ex.onDone = resolve
  })
  return { ex, done }
}

const types = (events: Logged[]) => events.map((e) => e.type)

t.test('executions run one at a time, in the order they were queued, each log in event order', async (t) => {
  const { runner, live, repl, store } = setup(t)
  const a = execution('exe_a', 'print("a")')
  const b = execution('exe_b', 'print("b")')
  await runner.enqueue(live, a.ex)
  await runner.enqueue(live, b.ex)
  const first = await repl.nextFrame('execute')
  t.equal(first.id, 'exe_a')
  t.equal(repl.frames.filter((f) => f.type === 'execute').length, 1, 'the second waits while the first runs')
  repl.send({ type: 'stream', exec_id: 'exe_a', name: 'stdout', text: 'a\n' })
  repl.send({ type: 'done', exec_id: 'exe_a', status: 'ok', execution_count: 1 })
  t.equal(await a.done, 'ok')
  const second = await repl.nextFrame('execute')
  t.equal(second.id, 'exe_b')
  repl.send({ type: 'done', exec_id: 'exe_b', status: 'ok', execution_count: 2 })
  t.equal(await b.done, 'ok')
  t.same(types(store.log('exe_a')), ['status', 'stdout', 'done'])
  t.same(store.log('exe_a')[0], { type: 'status', state: 'running', execution_id: 'exe_a' })
  t.same(types(store.log('exe_b')), ['status', 'status', 'done'], 'queued, then running, then done')
  t.equal(store.log('exe_b')[0]?.state, 'queued')
  t.equal(store.slots.size, 0, 'both execution slots were released')
  t.notOk(runner.isBusy(live))
})

t.test('an execution ends with exactly one done, whatever the sandbox sends after it', async (t) => {
  const { runner, live, repl, store } = setup(t)
  const a = execution('exe_a', 'x = 1')
  await runner.enqueue(live, a.ex)
  await repl.nextFrame('execute')
  repl.send({ type: 'done', exec_id: 'exe_a', status: 'ok', execution_count: 1 })
  repl.send({ type: 'done', exec_id: 'exe_a', status: 'error', execution_count: 1 })
  repl.send({ type: 'stream', exec_id: 'exe_a', name: 'stdout', text: 'late\n' })
  t.equal(await a.done, 'ok')
  await runner.sandboxGone(live, { oomKilled: false, exitCode: 137 })
  t.same(types(store.log('exe_a')), ['status', 'done'])
})

t.test('a forged done status becomes error; execution_count must be a number to be recorded', async (t) => {
  const { runner, live, repl, store } = setup(t)
  const a = execution('exe_a', 'x = 1')
  await runner.enqueue(live, a.ex)
  await repl.nextFrame('execute')
  repl.send({ type: 'done', exec_id: 'exe_a', status: 'everything-is-fine', execution_count: 'many' })
  t.equal(await a.done, 'error')
  t.same(store.log('exe_a').at(-1), { type: 'done', status: 'error', duration_ms: store.log('exe_a').at(-1)?.duration_ms })
})

t.test("output past the host's byte budget is dropped and reported in one limit event before done", async (t) => {
  const { runner, live, repl, store } = setup(t, { outputBytes: 200 })
  const a = execution('exe_a', 'flood()')
  await runner.enqueue(live, a.ex)
  await repl.nextFrame('execute')
  for (let i = 0; i < 50; i++) repl.send({ type: 'stream', exec_id: 'exe_a', name: 'stdout', text: 'x'.repeat(20) })
  repl.send({ type: 'done', exec_id: 'exe_a', status: 'ok', execution_count: 1 })
  await a.done
  const log = store.log('exe_a')
  const kept = log.filter((e) => e.type === 'stdout').length
  t.ok(kept > 0 && kept < 50, `some output kept, the rest dropped (kept ${kept} of 50)`)
  const limit = log.at(-2)
  t.equal(limit?.type, 'limit')
  t.equal(limit?.what, 'event_bytes')
  t.ok(Number(limit?.dropped_bytes) > 0)
  t.equal(log.at(-1)?.type, 'done')
})

t.test("a timeout interrupts; the REPL's answer is overridden to status timeout", async (t) => {
  const { runner, live, repl, killed } = setup(t)
  const a = execution('exe_a', 'while True: pass', 30)
  await runner.enqueue(live, a.ex)
  await repl.nextFrame('execute')
  await repl.nextFrame('interrupt')
  repl.send({ type: 'done', exec_id: 'exe_a', status: 'interrupted', execution_count: 1 })
  t.equal(await a.done, 'timeout')
  t.same(killed, [], 'no kill when the REPL answered the interrupt')
})

t.test('a REPL that ignores the interrupt is killed after the grace period, and the execution ends timeout', async (t) => {
  const { runner, live, repl, store, nextKill } = setup(t)
  const a = execution('exe_a', 'ignore_sigint()', 30)
  const kill = nextKill()
  await runner.enqueue(live, a.ex)
  await repl.nextFrame('interrupt')
  t.equal(await kill, 'c1', 'the sandbox is killed')
  // The kill is seen as the container's death, which ends the session's executions.
  live.state = 'stopping'
  await runner.sandboxGone(live, { oomKilled: false, exitCode: 137 })
  t.equal(await a.done, 'timeout')
  const log = store.log('exe_a')
  t.equal(log.at(-2)?.ename, 'SandboxKilled')
  t.equal(log.filter((e) => e.type === 'done').length, 1)
})

t.test("the queue depth and the tenant's execution quota are enforced", async (t) => {
  const { runner, live } = setup(t, { config: { EXEC_QUEUE_DEPTH: '1' } })
  await runner.enqueue(live, execution('exe_1', 'a').ex)
  await runner.enqueue(live, execution('exe_2', 'b').ex)
  await t.rejects(runner.enqueue(live, execution('exe_3', 'c').ex), { code: 'queue_full' })

  const other = setup(t, { maxSlots: 1 })
  await other.runner.enqueue(other.live, execution('exe_4', 'a').ex)
  await t.rejects(other.runner.enqueue(other.live, execution('exe_5', 'b').ex), { code: 'quota_exceeded' })
  t.equal(other.store.records.has('exe_5'), false, 'a refused execution leaves no record')
})

t.test('when the sandbox dies, the running and the queued executions each get an error and one done', async (t) => {
  const { runner, live, repl, store } = setup(t)
  const a = execution('exe_a', 'a')
  const b = execution('exe_b', 'b')
  await runner.enqueue(live, a.ex)
  await runner.enqueue(live, b.ex)
  await repl.nextFrame('execute')
  live.state = 'stopping'
  await runner.sandboxGone(live, { oomKilled: true, exitCode: 137 })
  t.equal(await a.done, 'oom')
  t.equal(await b.done, 'oom')
  for (const id of ['exe_a', 'exe_b']) {
    const log = store.log(id)
    t.equal(log.at(-2)?.ename, 'SandboxOutOfMemory', `${id}: the error says why`)
    t.equal(log.filter((e) => e.type === 'done').length, 1, `${id}: one done`)
  }
})

t.test('a streamed step logs into its target log with its tag, and observe can leave events out', async (t) => {
  const { runner, live, repl, store } = setup(t)
  const seen: string[] = []
  const ex = newPendingExecution('exe_step', '', 60_000, 'stream', {
    logId: 'exe_turn',
    tag: { step: 1 },
    observe: (e) => {
      seen.push(e.type)
      return e.type !== 'stderr'
    },
  })
  const done = new Promise<DoneStatusT>((resolve) => {
    ex.onDone = resolve
  })
  let started = false
  ex.onStart = () => {
    started = true
  }
  await runner.enqueue(live, ex)
  t.ok(started, 'onStart ran when the REPL was told to begin')
  t.equal((await repl.nextFrame('exec_stream_begin')).id, 'exe_step')
  repl.send({ type: 'stream', exec_id: 'exe_step', name: 'stdout', text: 'out\n' })
  repl.send({ type: 'stream', exec_id: 'exe_step', name: 'stderr', text: 'noise\n' })
  repl.send({ type: 'done', exec_id: 'exe_step', status: 'ok', execution_count: 1 })
  t.equal(await done, 'ok')
  t.same(seen, ['stdout', 'stderr'])
  t.same(
    store.log('exe_turn').map(({ seq: _seq, pos: _pos, ...e }) => e),
    [{ type: 'stdout', text: 'out\n', step: 1 }],
    'no status, no stderr, no done of its own',
  )
  t.same(store.log('exe_step'), [], 'nothing in a log of its own')
})

t.test('a write refused because the lease passed to another instance lets the session go: nothing more is written or run', async (t) => {
  const { runner, live, repl, store, letGo } = setup(t)
  const a = execution('exe_a', 'a')
  const b = execution('exe_b', 'b')
  await runner.enqueue(live, a.ex)
  await runner.enqueue(live, b.ex)
  await repl.nextFrame('execute')
  repl.send({ type: 'stream', exec_id: 'exe_a', name: 'stdout', text: 'one\n' })
  await new Promise(setImmediate)
  t.same(types(store.log('exe_a')), ['status', 'stdout'])
  // This instance was paused; another took the session over and relays its sandbox now.
  store.lost = true
  repl.send({ type: 'stream', exec_id: 'exe_a', name: 'stdout', text: 'two\n' })
  repl.send({ type: 'done', exec_id: 'exe_a', status: 'ok', execution_count: 1 })
  await a.done
  t.same(letGo, ['lost'], 'the session was let go, once')
  t.same(types(store.log('exe_a')), ['status', 'stdout'], 'nothing written after the refusal: the new holder writes the rest')
  t.equal(repl.frames.filter((f) => f.type === 'execute').length, 1, 'the queued execution is not sent to the sandbox (the new holder runs it)')
})

t.test('an execution submitted to an instance whose lease passed to another is refused session_moving, and the session let go', async (t) => {
  const { runner, live, store, letGo } = setup(t)
  store.lost = true
  await t.rejects(runner.enqueue(live, execution('exe_a', 'a').ex), { code: 'session_moving' })
  t.same(letGo, ['lost'])
  t.equal(store.records.has('exe_a'), false, 'nothing recorded')
})
