// Where the time of a pooled session create and of a one-shot print(1) goes: a timeline of one of
// each (Redis round trips, Docker API calls, the API's request in, handler start and response), with
// what happened after the reply (clean-up, refill), next to print(1) in an existing session.
// Run: node --import=@tapjs/typescript/import bench/pool-trace.ts (needs dockerd, Redis and the sandbox image).
import { Redis } from 'ioredis'
import { startBenchApp, type BenchApp } from './harness.js'
import {
  dockerCalls,
  firstResponse,
  mark,
  phaseMedian,
  phaseTimes,
  roundTrips,
  sequentialRoundTrips,
  timeline,
  traced,
  untraced,
  type Phase,
  type TraceEntry,
} from './trace.js'

const POOL_SIZE = 4
const SAMPLES = Number(process.env.BENCH_TRACE_SAMPLES ?? 20)

/**
 * The phases of a one-shot, each ending where the first entry matching it begins (`end`: where it
 * ends): the request's way in (auth, rate limit, placement, validation), the session (record,
 * pooled sandbox, its writes), the execution recorded, the REPL's round trip and its end recorded,
 * the reply, the client reading it.
 */
const PHASES: Phase[] = [
  ['request in (HTTP parse)', /^server: request in/, 'at'],
  ['auth, rate limit, placement, validation', /^server: handler starts/, 'at'],
  ['session: limits, pool take (CPU)', /^evalsha create_session /, 'at'],
  ['session: record, probe, binding, lease, ready', /^zadd deadlines/, 'end'],
  ['execution: slot, record and start', /^evalsha start_execution /, 'end'],
  ['REPL round trip, output appended', /^evalsha end_execution /, 'at'],
  ['end recorded', /^evalsha end_execution /, 'end'],
  ['reply written', /^server: response finished/, 'at'],
  ['client has read it', /^client: reply read/, 'at'],
]

function phaseTable(name: string, traces: TraceEntry[][]): void {
  console.log(`\n== ${name}: median of ${traces.length} (ms per phase; Redis round trips until the reply)`)
  const rows = traces.map((t) => phaseTimes(t, PHASES))
  PHASES.forEach(([label], i) =>
    console.log(
      `  ${label.padEnd(48)} ${phaseMedian(rows.map((r) => r[i]!))
        .toFixed(2)
        .padStart(7)}`,
    ),
  )
  const reply = traces.map((t) => firstResponse(t))
  console.log(`  ${'reply written after'.padEnd(48)} ${phaseMedian(reply).toFixed(2).padStart(7)}`)
  console.log(
    `  ${'Redis round trips (one after the other)'.padEnd(48)} ${phaseMedian(traces.map((t, i) => roundTrips(t, reply[i])))} (${phaseMedian(traces.map((t, i) => sequentialRoundTrips(t, reply[i])))})`,
  )
}

async function poolReady(app: BenchApp): Promise<number> {
  const text = await (await fetch(`${app.base}/metrics`)).text()
  return Number(/^replcast_pool_sandboxes\{state="ready"\} (\d+)/m.exec(text)?.[1] ?? 0)
}

async function until(what: string, ok: () => Promise<boolean>, ms = 60_000): Promise<void> {
  const end = Date.now() + ms
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms`)
    await new Promise((r) => setTimeout(r, 10))
  }
}

function report(name: string, t: { entries: TraceEntry[]; ms: number }, readAt: number): void {
  // Counted until the API had written its reply (the client, in this process, may read it later).
  const replyAt = Math.min(firstResponse(t.entries), readAt)
  console.log(`\n== ${name}: reply written after ${replyAt.toFixed(2)} ms, read by the client after ${readAt.toFixed(2)} ms`)
  for (const l of timeline(t.entries)) console.log(l)
  console.log(
    `  before the reply: ${roundTrips(t.entries, replyAt)} Redis round trips (${sequentialRoundTrips(t.entries, replyAt)} one after the other), ${dockerCalls(t.entries, replyAt)} Docker calls;` +
      ` after it: ${roundTrips(t.entries) - roundTrips(t.entries, replyAt)} round trips, ${dockerCalls(t.entries) - dockerCalls(t.entries, replyAt)} Docker calls`,
  )
}

async function main(): Promise<void> {
  const app = await startBenchApp({ SANDBOX_POOL_SIZE: String(POOL_SIZE) })
  const redis = untraced(new Redis(app.config.REDIS_URL))
  const prefix = app.config.REPLCAST_KEY_PREFIX
  const full = () => until('pool full', async () => (await poolReady(app)) >= POOL_SIZE, 120_000)
  const auth = { authorization: app.headers.authorization! }
  try {
    await full()
    // Warm-up: the template check, Redis scripts, connections.
    for (let i = 0; i < 3; i++) {
      const s = (await (await fetch(`${app.base}/v1/sessions`, { method: 'POST', headers: app.headers, body: '{}' })).json()) as { id: string }
      await fetch(`${app.base}/v1/sessions/${s.id}`, { method: 'DELETE', headers: auth })
      await fetch(`${app.base}/v1/execute`, { method: 'POST', headers: app.headers, body: '{"code":"print(1)"}' })
      await full()
    }

    let replyAt = 0
    let sid = ''
    const create = await traced(prefix, async () => {
      const t0 = performance.now()
      const res = await fetch(`${app.base}/v1/sessions`, { method: 'POST', headers: app.headers, body: '{}' })
      sid = ((await res.json()) as { id: string }).id
      replyAt = performance.now() - t0
      mark('client: reply read')
    })
    report('session create from the pool', create, replyAt)
    await full()

    for (const sse of [false, true]) {
      let at = 0
      let t0 = 0
      const t = await traced(prefix, async () => {
        t0 = performance.now()
        const res = await fetch(`${app.base}/v1/execute`, {
          method: 'POST',
          headers: { ...app.headers, ...(sse ? { accept: 'text/event-stream' } : {}) },
          body: '{"code":"print(1)"}',
        })
        const text = await res.text()
        at = performance.now() - t0
        mark('client: reply read')
        const one = sse ? /"session_id":"([^"]+)"/.exec(text)?.[1] : (JSON.parse(text) as { session_id: string }).session_id
        // The clean-up after the reply: the session's record and its container go.
        if (one) await until('one-shot removed', async () => (await redis.exists(`${prefix}{${one}}:session`)) === 0)
        await full()
      })
      report(`one-shot print(1) ${sse ? 'SSE' : 'JSON'}, until its clean-up and the pool's refill`, t, at)
    }

    // The same phases over many one-shots, the pool refilled and the last one cleaned up before each.
    for (const sse of [false, true]) {
      const traces: TraceEntry[][] = []
      for (let i = 0; i < SAMPLES; i++) {
        await full()
        let one: string | undefined
        const t = await traced(prefix, async () => {
          const res = await fetch(`${app.base}/v1/execute`, {
            method: 'POST',
            headers: { ...app.headers, ...(sse ? { accept: 'text/event-stream' } : {}) },
            body: '{"code":"print(1)"}',
          })
          const text = await res.text()
          mark('client: reply read')
          one = /"session_id":"([^"]+)"/.exec(text)?.[1]
        })
        traces.push(t.entries)
        if (one) await until('one-shot removed', async () => (await redis.exists(`${prefix}{${one}}:session`)) === 0)
      }
      phaseTable(`one-shot print(1) ${sse ? 'SSE' : 'JSON'} by phase`, traces)
    }

    const exec = async () => {
      const res = await fetch(`${app.base}/v1/sessions/${sid}/executions`, { method: 'POST', headers: app.headers, body: '{"code":"print(1)"}' })
      await res.text()
    }
    await exec()
    let at = 0
    const inSession = await traced(prefix, async () => {
      const t0 = performance.now()
      await exec()
      at = performance.now() - t0
      mark('client: reply read')
    })
    report('print(1) JSON in an existing session', inSession, at)
    await fetch(`${app.base}/v1/sessions/${sid}`, { method: 'DELETE', headers: auth })
  } finally {
    redis.disconnect()
    await app.close()
  }
}

await main()
