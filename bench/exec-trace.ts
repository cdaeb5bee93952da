// Where the time of print(1) in an existing session goes, typical and in its tail: each phase's
// median over all samples, and its mean over the slowest 3 % (means add up to their total), from the request coming in to the client having
// read the answer (HTTP POST + SSE). The server runs in this process (bench/harness.ts), so the
// client's own work slows the figures down a little; the phases still show which part a slow request
// lost its time in. Run: node --import=@tapjs/typescript/import bench/exec-trace.ts (needs dockerd,
// Redis and the sandbox image; BENCH_TRACE_SAMPLES, default 600).
import { ReplClient } from '../src/repl/repl-client.js'
import type { ReplFrame } from '../src/repl/protocol.js'
import { startBenchApp } from './harness.js'
import { mark, phaseMedian, phaseTimes, traced, type Phase, type TraceEntry } from './trace.js'

const SAMPLES = Number(process.env.BENCH_TRACE_SAMPLES ?? 600)
const SLOWEST = 0.03

/** Each phase ends where the first entry matching it begins (`end`: where it ends). */
const PHASES: Phase[] = [
  ['request in (client, HTTP parse)', /^server: request in/, 'at'],
  ['auth, rate limit, validation', /^server: handler starts/, 'at'],
  ['execution recorded and started (Redis)', /^evalsha start_execution /, 'end'],
  ['code sent to the REPL', /^repl: execute sent/, 'at'],
  ['REPL round trip (Docker attach, Python)', /^repl: first frame/, 'at'],
  ['end recorded (Redis)', /^evalsha end_execution /, 'end'],
  ['reply written', /^server: response finished/, 'at'],
  ['client has read it', /^client: reply read/, 'at'],
]

/** The REPL client's sends and receipts, as marks in the running trace. */
function markRepl(): void {
  const proto = ReplClient.prototype as unknown as {
    execute: (...a: unknown[]) => void
    dispatch: (f: ReplFrame) => void
  }
  const execute = proto.execute
  proto.execute = function (this: unknown, ...a: unknown[]) {
    mark('repl: execute sent')
    execute.apply(this, a)
  }
  const dispatch = proto.dispatch
  let first = true
  proto.dispatch = function (this: unknown, f: ReplFrame) {
    if (first) mark('repl: first frame')
    first = f.type === 'done'
    dispatch.call(this, f)
  }
}

function mean(xs: number[]): number {
  const s = xs.filter((x) => !Number.isNaN(x))
  return s.reduce((a, b) => a + b, 0) / s.length
}

async function main(): Promise<void> {
  markRepl()
  const app = await startBenchApp()
  try {
    const created = await fetch(`${app.base}/v1/sessions`, { method: 'POST', headers: app.headers, body: '{}' })
    const sid = ((await created.json()) as { id: string }).id
    const exec = async () => {
      const res = await fetch(`${app.base}/v1/sessions/${sid}/executions`, {
        method: 'POST',
        headers: { ...app.headers, accept: 'text/event-stream' },
        body: '{"code":"print(1)"}',
      })
      await res.text()
    }
    for (let i = 0; i < 50; i++) await exec()
    const traces: TraceEntry[][] = []
    for (let i = 0; i < SAMPLES; i++) {
      const t = await traced(app.config.REPLCAST_KEY_PREFIX, async () => {
        await exec()
        mark('client: reply read')
      })
      traces.push(t.entries)
    }
    const rows = traces.map((t) => phaseTimes(t, PHASES))
    const total = (r: number[]) => r.reduce((a, b) => a + (Number.isNaN(b) ? 0 : b), 0)
    const slow = [...rows].sort((a, b) => total(a) - total(b)).slice(-Math.max(1, Math.round(rows.length * SLOWEST)))
    console.log(`\n== print(1) SSE in an existing session by phase (ms): median of ${rows.length}; mean of the slowest ${slow.length}`)
    PHASES.forEach(([label], i) => {
      const all = phaseMedian(rows.map((r) => r[i]!))
      const tail = mean(slow.map((r) => r[i]!))
      console.log(`  ${label.padEnd(44)} ${all.toFixed(2).padStart(7)} ${tail.toFixed(2).padStart(8)}`)
    })
    console.log(`  ${'in all'.padEnd(44)} ${phaseMedian(rows.map(total)).toFixed(2).padStart(7)} ${mean(slow.map(total)).toFixed(2).padStart(8)}`)
    await fetch(`${app.base}/v1/sessions/${sid}`, { method: 'DELETE', headers: { authorization: app.headers.authorization! } })
  } finally {
    await app.close()
  }
}

await main()
