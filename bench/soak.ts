// Issue 11, creates that hang: N session creates one after the other and N in batches of 20 (each
// session deleted after), counting creates that took over 5 s or failed, and the slowest. BENCH_SOAK=1
// runs the 1,000 + 1,000; by default a short version of 50 + 50 (BENCH_SOAK_CREATES sets N).
import { createSession, deleteSession, inBatches, type Target } from './client.js'
import type { Report } from './report.js'
import { startServer } from './server.js'
import { summarize } from './stats.js'

const N = Number(process.env.BENCH_SOAK_CREATES ?? (process.env.BENCH_SOAK === '1' ? 1000 : 50))
const SLOW_MS = 5000

interface Outcome {
  ms: number
  error?: string
}

async function timedCreate(t: Target): Promise<Outcome> {
  const t0 = performance.now()
  try {
    const sid = await createSession(t)
    const ms = performance.now() - t0
    await deleteSession(t, sid)
    return { ms }
  } catch (err) {
    return { ms: performance.now() - t0, error: (err as Error).message.slice(0, 200) }
  }
}

export async function soak(report: Report): Promise<void> {
  const G = 'soak'
  const server = await startServer()
  try {
    const t: Target = server
    const sequential: Outcome[] = []
    for (let i = 0; i < N; i++) sequential.push(await timedCreate(t))
    const batched = (
      await inBatches(
        Array.from({ length: N }, () => 0),
        20,
        () => timedCreate(t),
      )
    ).map((r) => (r.status === 'fulfilled' ? r.value : { ms: NaN, error: String(r.reason) }))
    for (const [label, xs] of [
      ['sequential', sequential],
      ['in batches of 20', batched],
    ] as const) {
      const s = summarize(xs.map((x) => x.ms))
      const slow = xs.filter((x) => x.ms > SLOW_MS).length
      const failed = xs.filter((x) => x.error)
      if (failed.length) report.note(G, `${label}: ${failed.length} creates failed, e.g. ${failed[0]!.error}`)
      report.add(G, `creates over ${SLOW_MS / 1000} s or failed, ${N} ${label}`, slow + failed.filter((x) => x.ms <= SLOW_MS).length, 'creates', {
        target: '0',
        met: slow === 0 && failed.length === 0,
      })
      report.add(G, `slowest create, ${N} ${label}`, s.max, 'ms', { note: `p50 ${s.median.toFixed(0)} ms` })
    }
  } finally {
    await server.close()
  }
}
