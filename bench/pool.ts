// The warm pool's worth, measured in one run: session create from the pool next to a cold create
// (a request the pool does not match), and one-shot print(1) through POST /v1/execute (JSON and SSE)
// from the pool next to a cold one-shot. Each pooled sample starts with the pool refilled, as a
// service sees it between bursts. Targets: pooled create p50 <= 10 ms and >= 10x faster than cold;
// one-shot p50 <= 15 ms. Each request's Redis round trips and Docker calls until its reply are counted
// (bench/trace.ts; bench/pool-trace.ts shows one request's timeline). Run: npm run bench (needs
// dockerd, Redis and the sandbox image).
import { startBenchApp, type BenchApp } from './harness.js'
import { line, summarize } from './stats.js'
import { dockerCalls, firstResponse, roundTrips, sequentialRoundTrips, traced } from './trace.js'

const SAMPLES = Number(process.env.BENCH_POOL_SAMPLES ?? 30)
const POOL_SIZE = 4
/** A create the pool does not match (it holds sandboxes without env): the same sandbox, made cold. */
const COLD_SESSION = { env: { BENCH: '1' } }
/** A one-shot the pool does not match: one MiB less memory. */
const coldLimits = (app: BenchApp) => ({ memory_mb: app.config.SANDBOX_MEMORY_MB - 1 })

async function poolReady(app: BenchApp): Promise<number> {
  const text = await (await fetch(`${app.base}/metrics`)).text()
  const m = /^replcast_pool_sandboxes\{state="ready"\} (\d+)/m.exec(text)
  return Number(m?.[1] ?? 0)
}

async function poolFull(app: BenchApp): Promise<void> {
  const end = Date.now() + 120_000
  while ((await poolReady(app)) < POOL_SIZE) {
    if (Date.now() > end) throw new Error('the pool did not refill within 2 minutes')
    await new Promise((r) => setTimeout(r, 20))
  }
}

async function hits(app: BenchApp): Promise<number> {
  const text = await (await fetch(`${app.base}/metrics`)).text()
  return Number(/^replcast_pool_takes_total\{result="hit"\} (\d+)/m.exec(text)?.[1] ?? 0)
}

async function create(app: BenchApp, body: object): Promise<number> {
  const t0 = performance.now()
  const res = await fetch(`${app.base}/v1/sessions`, { method: 'POST', headers: app.headers, body: JSON.stringify(body) })
  const s = (await res.json()) as { id?: string }
  const ms = performance.now() - t0
  if (res.status !== 201 || !s.id) throw new Error(`create answered ${res.status}: ${JSON.stringify(s)}`)
  await fetch(`${app.base}/v1/sessions/${s.id}`, { method: 'DELETE', headers: { authorization: app.headers.authorization! } })
  return ms
}

async function oneShot(app: BenchApp, sse: boolean, body: object): Promise<number> {
  const t0 = performance.now()
  const res = await fetch(`${app.base}/v1/execute`, {
    method: 'POST',
    headers: { ...app.headers, ...(sse ? { accept: 'text/event-stream' } : {}) },
    body: JSON.stringify({ code: 'print(1)', ...body }),
  })
  const text = await res.text()
  const ms = performance.now() - t0
  if (res.status !== 200 || !(sse ? text.includes('event: done') : text.includes('"type":"done"'))) throw new Error(`one-shot answered ${res.status}: ${text}`)
  return ms
}

/** The same print(1) as an execution in an existing session (no sandbox to get): what a one-shot adds a create to. */
async function execution(app: BenchApp, sid: string): Promise<number> {
  const t0 = performance.now()
  const res = await fetch(`${app.base}/v1/sessions/${sid}/executions`, { method: 'POST', headers: app.headers, body: '{"code":"print(1)"}' })
  const text = await res.text()
  const ms = performance.now() - t0
  if (res.status !== 200 || !text.includes('"type":"done"')) throw new Error(`execution answered ${res.status}: ${text}`)
  return ms
}

/** What each request of a sample cost until its reply: Redis round trips (all, and those that waited one after the other), Docker calls. */
const costs = new Map<number[], { rt: number[]; seq: number[]; docker: number[] }>()

async function sample(app: BenchApp, n: number, fn: () => Promise<number>, before?: () => Promise<void>): Promise<number[]> {
  const out: number[] = []
  const cost = { rt: [] as number[], seq: [] as number[], docker: [] as number[] }
  for (let i = 0; i < n; i++) {
    await before?.()
    const t = await traced(app.config.REPLCAST_KEY_PREFIX, fn)
    out.push(t.value)
    // Until the API had written its reply: what the one-shot's clean-up does after it is not counted.
    const until = Math.min(firstResponse(t.entries), t.value)
    cost.rt.push(roundTrips(t.entries, until))
    cost.seq.push(sequentialRoundTrips(t.entries, until))
    cost.docker.push(dockerCalls(t.entries, until))
  }
  costs.set(out, cost)
  return out
}

/** The sample's median round trips and Docker calls per request. */
function costLine(samples: number[]): string {
  const c = costs.get(samples)
  if (!c) return ''
  const med = (xs: number[]) => summarize(xs).median
  return `  Redis ${String(med(c.rt)).padStart(2)} round trips (${String(med(c.seq)).padStart(2)} one after the other), Docker ${med(c.docker)}`
}

async function main(): Promise<void> {
  const app = await startBenchApp({ SANDBOX_POOL_SIZE: String(POOL_SIZE) })
  try {
    await poolFull(app)
    // Warm-up: the template check, Redis scripts, connections.
    await create(app, {})
    await create(app, COLD_SESSION)
    await oneShot(app, false, {})
    const h0 = await hits(app)
    const full = () => poolFull(app)
    const pooledCreate = await sample(app, SAMPLES, () => create(app, {}), full)
    const coldCreate = await sample(app, SAMPLES, () => create(app, COLD_SESSION), full)
    const pooledJson = await sample(app, SAMPLES, () => oneShot(app, false, {}), full)
    const pooledSse = await sample(app, SAMPLES, () => oneShot(app, true, {}), full)
    const coldJson = await sample(app, Math.ceil(SAMPLES / 3), () => oneShot(app, false, { limits: coldLimits(app) }), full)
    const sid = ((await (await fetch(`${app.base}/v1/sessions`, { method: 'POST', headers: app.headers, body: '{}' })).json()) as { id: string }).id
    await execution(app, sid)
    const inSession = await sample(app, SAMPLES, () => execution(app, sid))
    const took = (await hits(app)) - h0
    console.log(`warm pool benchmark (pool of ${POOL_SIZE}, ${SAMPLES} samples each, the pool refilled before each; ${took} pool hits)`)
    const show = (name: string, s: number[]) => console.log(line(name, s) + costLine(s))
    show('session create, from the pool', pooledCreate)
    show('session create, cold (baseline)', coldCreate)
    show('one-shot print(1) JSON, from the pool', pooledJson)
    show('one-shot print(1) SSE, from the pool', pooledSse)
    show('one-shot print(1) JSON, cold (baseline)', coldJson)
    show('print(1) JSON in an existing session', inSession)
    const med = (s: number[]) => summarize(s).median
    console.log(
      `ratio median cold / pooled: session create ${(med(coldCreate) / med(pooledCreate)).toFixed(1)}x; one-shot JSON ${(med(coldJson) / med(pooledJson)).toFixed(1)}x`,
    )
    console.log(
      `ratio median one-shot / print(1) in an existing session (same run): JSON ${(med(pooledJson) / med(inSession)).toFixed(1)}x, SSE ${(med(pooledSse) / med(inSession)).toFixed(1)}x`,
    )
    const ok = med(pooledCreate) <= 10 && med(coldCreate) >= 10 * med(pooledCreate) && med(pooledJson) <= 15 && med(pooledSse) <= 15
    console.log(`targets (create p50 <= 10 ms and >= 10x cold; one-shot JSON and SSE p50 <= 15 ms): ${ok ? 'met' : 'NOT met'}`)
  } finally {
    await app.close()
  }
}

await main()
