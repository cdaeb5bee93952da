// Issue 11, output sent when written: how long after `print("a")` runs its stdout event reaches the
// client (the sandbox prints the time, which the container shares with the host), the first stdout
// event after the POST, and the "a"→"b" gap the client sees, idle and with 20 other sessions
// busy-looping; baselines: the print(1) round trip of the same server, and 2000 ms for the gap.
import { createSession, deleteSession, execute, inBatches, printOne, type Target } from './client.js'
import type { Report } from './report.js'
import { startServer } from './server.js'
import { summarize } from './stats.js'

const N = Math.max(5, Number(process.env.BENCH_FIRST_OUTPUT_ROUNDS ?? 5))
const BUSY = 20
const CODE = 'print("a", repr(time.time())); time.sleep(2); print("b")'

interface Sample {
  /** From the POST to the first stdout event. */
  first: number
  /** From the print running in the sandbox to its stdout event at the client. */
  printed: number
  gap: number
}

async function probe(t: Target, sid: string): Promise<Sample> {
  let a = NaN
  let b = NaN
  let printedAt = NaN
  const run = await execute(t, sid, CODE, {
    onEvent: (e) => {
      if (e.event !== 'stdout') return
      const text = String((e.data as { text?: string }).text ?? '')
      if (Number.isNaN(a) && text.includes('a')) {
        a = e.at
        printedAt = Number(/a (\d+\.\d+)/.exec(text)?.[1]) * 1000
      }
      if (Number.isNaN(b) && text.includes('b')) b = e.at
    },
  })
  if (Number.isNaN(a) || Number.isNaN(b)) throw new Error('the probe did not see both "a" and "b" as stdout events')
  return { first: a - run.t0, printed: performance.timeOrigin + a - printedAt, gap: b - a }
}

async function samples(t: Target, sid: string): Promise<Sample[]> {
  const out: Sample[] = []
  for (let i = 0; i < N; i++) out.push(await probe(t, sid))
  return out
}

/** Starts `while True: pass` in each session and resolves once every one of them is running. */
async function busyLoop(t: Target, sids: string[]): Promise<void> {
  await Promise.all(
    sids.map(
      (sid) =>
        new Promise<void>((resolve, reject) => {
          execute(t, sid, 'while True: pass', {
            timeout_s: 600,
            onEvent: (e) => {
              if (e.event === 'status' && (e.data as { state?: string }).state === 'running') resolve()
            },
          }).catch(reject)
        }),
    ),
  )
}

export async function firstOutput(report: Report): Promise<void> {
  const G = 'first-output'
  const server = await startServer()
  try {
    const t: Target = server
    const sid = await createSession(t)
    await execute(t, sid, 'import time')
    const rt: number[] = []
    for (let i = 0; i < 110; i++) rt.push(await printOne(t, sid))
    const p50 = summarize(rt.slice(10)).median
    const idle = await samples(t, sid)
    const created = await inBatches(
      Array.from({ length: BUSY }, () => 0),
      20,
      () => createSession(t),
    )
    const busy = created.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []))
    if (busy.length < BUSY) report.note(G, `only ${busy.length} of ${BUSY} busy sessions could be created`)
    await busyLoop(t, busy)
    const loaded = await samples(t, sid)
    await inBatches(busy, 20, (s) => deleteSession(t, s))

    console.log(`  (n=${N} each; the "a"→"b" gap's p99 over ${N} samples is its worst)`)
    const worst = (xs: Sample[]) => Math.max(...xs.map((s) => Math.abs(s.gap - 2000)))
    for (const [label, xs, tol] of [
      ['idle', idle, 5],
      [`${busy.length} sessions busy-looping`, loaded, 10],
    ] as const) {
      const printed = summarize(xs.map((s) => s.printed))
      report.add(G, `print in the sandbox → its stdout event at the client, ${label}, p50`, printed.median, 'ms', {
        target: '<= 2 ms',
        met: printed.median <= 2,
      })
      report.add(G, `print in the sandbox → its stdout event at the client, ${label}, max`, printed.max, 'ms')
      const first = summarize(xs.map((s) => s.first))
      report.add(G, `first stdout after POST, ${label}, p50`, first.median, 'ms', {
        baseline: { name: 'print(1) round trip p50', value: p50 },
        ratio: 'ours/baseline',
      })
      report.add(G, `first stdout after POST, ${label}, max`, first.max, 'ms', {
        baseline: { name: 'print(1) round trip p50', value: p50 },
        ratio: 'ours/baseline',
      })
      const gap = summarize(xs.map((s) => s.gap))
      report.add(G, `"a"→"b" gap, ${label}, p50`, gap.median, 'ms', { baseline: { name: 'time.sleep(2)', value: 2000 }, ratio: 'ours/baseline' })
      report.add(G, `"a"→"b" gap, ${label}, worst |gap - 2000|`, worst(xs), 'ms', { target: `<= ${tol} ms`, met: worst(xs) <= tol })
    }
  } finally {
    await server.close()
  }
}
