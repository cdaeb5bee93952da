// runc against runsc (gVisor), the figures that decide the default runtime: cold create (no pool),
// a create the warm pool serves, print(1) round trip p50/p99, bulk output (50 MiB to one SSE client)
// and host memory per idle session. Each runtime gets a server of its own whose default it is
// (SANDBOX_RUNTIME), both in the same run; the table shows each figure for both and runsc/runc.
import { setTimeout as sleep } from 'node:timers/promises'
import { createSession, deleteSession, execute, printOne, type Target } from './client.js'
import { containerMemory } from './raw-docker.js'
import type { Report } from './report.js'
import { startServer, type BenchServer } from './server.js'
import { summarize } from './stats.js'
import { containerName } from '../src/sandbox/container-spec.js'

const CREATES = Number(process.env.BENCH_RUNTIME_CREATES ?? 12)
const ROUNDS = Number(process.env.BENCH_RUNTIME_ROUNDS ?? 300)
const POOL_SIZE = 2
const IDLE_SESSIONS = 4
const IDLE_MS = 5000
const BULK_CHUNKS = 800
const BULK_CODE = `import sys\nb = 'x' * 65535 + '\\n'\nfor _ in range(${BULK_CHUNKS}):\n    sys.stdout.write(b)\nsys.stdout.flush()`
const MiB = 1024 * 1024

type Runtime = 'runc' | 'runsc'

interface Figures {
  cold: number[]
  pooled: number[]
  print: number[]
  bulkMBs: number
  idleMiB: number
}

async function poolReady(s: BenchServer): Promise<number> {
  const text = await (await fetch(`${s.base}/metrics`)).text()
  return Number(/^replcast_pool_sandboxes\{state="ready"\} (\d+)/m.exec(text)?.[1] ?? 0)
}

async function poolFull(s: BenchServer): Promise<void> {
  const end = Date.now() + 120_000
  while ((await poolReady(s)) < POOL_SIZE) {
    if (Date.now() > end) throw new Error('the pool did not refill within 2 minutes')
    await sleep(20)
  }
}

async function timedCreate(t: Target, body: object = {}): Promise<number> {
  const t0 = performance.now()
  const sid = await createSession(t, body)
  const ms = performance.now() - t0
  await deleteSession(t, sid)
  return ms
}

async function measure(runtime: Runtime): Promise<Figures> {
  const cold = await startServer({ SANDBOX_RUNTIME: runtime })
  const f: Figures = { cold: [], pooled: [], print: [], bulkMBs: 0, idleMiB: 0 }
  try {
    for (let i = 0; i < CREATES + 2; i++) {
      const ms = await timedCreate(cold)
      if (i >= 2) f.cold.push(ms)
    }
    const sid = await createSession(cold, { limits: { output_bytes: BULK_CHUNKS * 65536 + MiB } })
    for (let i = 0; i < ROUNDS + 30; i++) {
      const ms = await printOne(cold, sid)
      if (i >= 30) f.print.push(ms)
    }
    let bytes = 0
    let first = 0
    await execute(cold, sid, BULK_CODE, {
      timeout_s: 300,
      onEvent: (e) => {
        if (e.event !== 'stdout') return
        first ||= e.at
        bytes += String((e.data as { text?: string }).text ?? '').length
      },
    })
    f.bulkMBs = bytes / 1e6 / ((performance.now() - first) / 1000)
    const idle: string[] = []
    for (let i = 0; i < IDLE_SESSIONS; i++) idle.push(await createSession(cold))
    await sleep(IDLE_MS)
    const mem = await Promise.all(idle.map((s) => containerMemory(containerName(s))))
    f.idleMiB = summarize(mem.map((m) => m.stats)).median / MiB
  } finally {
    await cold.close()
  }
  const pooled = await startServer({ SANDBOX_RUNTIME: runtime, SANDBOX_POOL_SIZE: String(POOL_SIZE) })
  try {
    for (let i = 0; i < CREATES + 2; i++) {
      await poolFull(pooled)
      const ms = await timedCreate(pooled)
      if (i >= 2) f.pooled.push(ms)
    }
  } finally {
    await pooled.close()
  }
  return f
}

export async function runtimes(report: Report): Promise<void> {
  const G = 'runtimes'
  const runc = await measure('runc')
  const runsc = await measure('runsc')
  const rows: Array<[string, number, number, string]> = [
    ['cold create p50', summarize(runc.cold).median, summarize(runsc.cold).median, 'ms'],
    ['cold create p99', summarize(runc.cold).p99, summarize(runsc.cold).p99, 'ms'],
    ['pooled create p50', summarize(runc.pooled).median, summarize(runsc.pooled).median, 'ms'],
    ['print(1) p50', summarize(runc.print).median, summarize(runsc.print).median, 'ms'],
    ['print(1) p99', summarize(runc.print).p99, summarize(runsc.print).p99, 'ms'],
    ['bulk output (50 MiB, one SSE client)', runc.bulkMBs, runsc.bulkMBs, 'MB/s'],
    ['host memory per idle session', runc.idleMiB, runsc.idleMiB, 'MiB'],
  ]
  console.log(`  | figure | runc | runsc | runsc/runc |\n  |---|---|---|---|`)
  for (const [name, a, b, unit] of rows) {
    console.log(`  | ${name} | ${a.toFixed(1)} ${unit} | ${b.toFixed(1)} ${unit} | ${(b / a).toFixed(2)} |`)
    report.add(G, `${name} (runsc)`, b, unit, { baseline: { name: `${name} (runc)`, value: a }, ratio: 'ours/baseline', ratioName: 'runsc / runc' })
  }
  report.note(G, `creates n=${CREATES} each, print(1) n=${ROUNDS}, ${IDLE_SESSIONS} idle sessions after ${IDLE_MS / 1000} s`)
}
