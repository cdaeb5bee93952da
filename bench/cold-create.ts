// Issue 11, cold session create: POST /v1/sessions until its 201 with the warm pool off, for runc and
// (when dockerd has it) runsc, next to a raw dockerode create + attach + start + first echo of a
// container with the same flags (bench/raw-docker.ts), samples of the two interleaved.
import { createSession, deleteSession, type Target } from './client.js'
import { hasRunsc, removeRaw, startRaw } from './raw-docker.js'
import type { Report } from './report.js'
import { startServer } from './server.js'
import { summarize } from './stats.js'

const N = Number(process.env.BENCH_COLD_CREATES ?? 15)
const WARMUP = 2
const TARGET = { runc: 1.2, runsc: 1.5 }

export async function coldCreate(report: Report): Promise<void> {
  const G = 'cold-create'
  const server = await startServer({ SANDBOX_POOL_SIZE: '0' })
  const raw = `${server.deployment}-raw`
  try {
    const t: Target = server
    const runtimes: Array<'runc' | 'runsc'> = (await hasRunsc()) ? ['runc', 'runsc'] : ['runc']
    if (runtimes.length === 1) report.note(G, 'runsc is not registered with dockerd: runc only')
    for (const runtime of runtimes) {
      const ours: number[] = []
      const base: number[] = []
      for (let i = 0; i < N + WARMUP; i++) {
        let t0 = performance.now()
        const sid = await createSession(t, { runtime })
        if (i >= WARMUP) ours.push(performance.now() - t0)
        await deleteSession(t, sid)
        t0 = performance.now()
        const c = await startRaw(raw, runtime, ['cat'])
        await c.echo('ready?')
        if (i >= WARMUP) base.push(performance.now() - t0)
        await c.remove()
      }
      const o = summarize(ours)
      const b = summarize(base)
      report.add(G, `cold session create (${runtime}), p50`, o.median, 'ms', {
        baseline: { name: 'raw create+attach+start+echo p50', value: b.median },
        ratio: 'ours/baseline',
        target: `<= ${TARGET[runtime]}x raw`,
        met: o.median <= TARGET[runtime] * b.median,
        note: `n=${N}, max ${o.max.toFixed(0)} ms`,
      })
    }
  } finally {
    await server.close()
    await removeRaw(raw)
  }
}
