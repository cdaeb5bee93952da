// Issue 11, density: N idle sessions (BENCH_DENSITY, default 100; the target is 1,000) created in
// batches of 20, the API's RSS with them, and print(1) p99 on one of them next to its p99 at 1 session.
// Sessions ask for the smallest memory limit (32 MiB) and the server may promise twice the host's
// memory (HOST_MEMORY_SHARE=2: 1,000 sessions of 32 MiB on a 24 GiB host; idle, each uses a few MiB),
// so that the capacity check admits as many as it can; what it refuses is reported.
import { freemem } from 'node:os'
import { setTimeout as sleep } from 'node:timers/promises'
import { createSession, inBatches, printOne, type Target } from './client.js'
import type { Report } from './report.js'
import { rssBytes, startServer } from './server.js'
import { summarize } from './stats.js'

const N = Number(process.env.BENCH_DENSITY ?? 100)
const ROUNDS = 300
const MB = 1024 * 1024
const SESSION = { limits: { memory_mb: 32 } }

async function p99(t: Target, sid: string): Promise<number> {
  const xs: number[] = []
  for (let i = 0; i < ROUNDS + 20; i++) xs.push(await printOne(t, sid))
  return summarize(xs.slice(20)).p99
}

export async function density(report: Report): Promise<void> {
  const G = 'density'
  const server = await startServer({ HOST_MEMORY_SHARE: '2', TENANT_MAX_SESSIONS: String(N + 100) })
  try {
    const t: Target = server
    const free0 = freemem()
    const first = await createSession(t, SESSION)
    const alone = await p99(t, first)
    const rss0 = rssBytes(server.pid)
    const c0 = performance.now()
    const made = await inBatches(
      Array.from({ length: N - 1 }, () => 0),
      20,
      () => createSession(t, SESSION),
    )
    const createS = (performance.now() - c0) / 1000
    const failures = made.filter((r) => r.status === 'rejected')
    const live = N - failures.length
    if (failures.length) {
      const why = new Set(failures.map((r) => String(r.reason).slice(0, 160)))
      report.note(G, `${failures.length} of ${N} creates failed: ${[...why].slice(0, 3).join(' | ')}`)
    }
    await sleep(3000)
    const rss = rssBytes(server.pid) / MB
    const hostPer = (free0 - freemem()) / MB / live
    const loaded = await p99(t, first)
    console.log(
      `  (${live} idle sessions, created in ${createS.toFixed(1)} s in batches of 20; host memory in use grew by ${hostPer.toFixed(1)} MiB per session; API RSS with 1 session ${(rss0 / MB).toFixed(0)} MiB)`,
    )
    report.add(G, `API RSS with ${live} idle sessions`, rss, 'MiB', {
      baseline: { name: 'with 1 session', value: rss0 / MB },
      ratio: 'ours/baseline',
      target: '<= 300 MiB at 1,000 sessions',
      met: live >= 1000 ? rss <= 300 : undefined,
    })
    report.add(G, `print(1) p99 with ${live} idle sessions`, loaded, 'ms', {
      baseline: { name: 'p99 at 1 session', value: alone },
      ratio: 'ours/baseline',
      target: '<= 2x at 1,000 sessions',
      met: live >= 1000 ? loaded <= 2 * alone : undefined,
    })
  } finally {
    await server.close()
  }
}
