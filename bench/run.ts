// npm run bench, issue 11's part: runs each figure group against a server process of its own (the
// client is this process), prints every figure with its same-run baseline, ratio and target, and
// writes them to bench/results/<time>.json and bench/results/latest.json.
// Run: node --import=@tapjs/typescript/import bench/run.ts [group...]   (all groups when none is named)
// Knobs: BENCH_ROUNDS (>= 500), BENCH_DENSITY (sessions, default 100), BENCH_SOAK=1 (1,000 + 1,000 creates),
// BENCH_HIBERNATED (sessions hibernated at once, default 100; the figure is at 1,000).
import { bulk } from './bulk.js'
import { coldCreate } from './cold-create.js'
import { density } from './density.js'
import { fairShare } from './fair-share.js'
import { firstOutput } from './first-output.js'
import { hibernate } from './hibernate.js'
import { latency } from './latency.js'
import { idleMemory } from './memory.js'
import { redisBytes } from './redis-bytes.js'
import { Report } from './report.js'
import { runtimes } from './runtimes.js'
import { soak } from './soak.js'
import { throughput } from './throughput.js'

const GROUPS: Record<string, (r: Report) => Promise<void>> = {
  latency,
  'first-output': firstOutput,
  throughput,
  'redis-bytes': redisBytes,
  memory: idleMemory,
  density,
  bulk,
  'cold-create': coldCreate,
  soak,
  'fair-share': fairShare,
  runtimes,
  hibernate,
}

const asked = process.argv.slice(2)
const unknown = asked.filter((g) => !(g in GROUPS))
if (unknown.length) {
  console.error(`unknown group(s): ${unknown.join(', ')}; groups: ${Object.keys(GROUPS).join(', ')}`)
  process.exit(2)
}
const report = new Report()
console.log(`(load average at start: ${report.loadAtStart.map((l) => l.toFixed(2)).join(' ')} on ${navigator.hardwareConcurrency} cores)`)
let failed = 0
const t0 = performance.now()
for (const [name, run] of Object.entries(GROUPS)) {
  if (asked.length && !asked.includes(name)) continue
  const g0 = performance.now()
  console.log(`== ${name}`)
  try {
    await run(report)
  } catch (err) {
    failed++
    report.note(name, `failed: ${(err as Error).stack ?? String(err)}`)
  }
  console.log(`  (${name}: ${((performance.now() - g0) / 1000).toFixed(0)} s)`)
  report.write()
}
const file = report.write(true)
console.log(`== issue 11 targets (${((performance.now() - t0) / 1000).toFixed(0)} s in all; written to ${file} and bench/results/latest.json)`)
for (const l of report.summary()) console.log(l)
if (failed) {
  console.log(`${failed} group(s) failed`)
  process.exitCode = 1
}
