// Issue 34's fork and snapshot figures, part of the hibernate group (bench/hibernate.ts runs them on its
// server): a fork of 1 and of 8 (POST .../fork until every copy is ready), each against the same run's
// bare wake; and the pause a snapshot of a running session causes, seen from outside as the time a
// print(1) sent while the snapshot is under way waits, against the same run's bare hibernate. Every copy
// and snapshot is deleted afterwards.
import { call, createSession, deleteSession, execute, type Target } from './client.js'
import type { Report } from './report.js'
import { summarize } from './stats.js'

const ROUNDS = Number(process.env.BENCH_FORK_ROUNDS ?? 3)
const EIGHT_ROUNDS = Number(process.env.BENCH_FORK8_ROUNDS ?? 2)
/** How long after the snapshot's POST the probe is sent: late enough that the snapshot holds the session. */
const PROBE_AFTER_MS = 100
const G = 'hibernate'

/** A fork of `count`: ms from the POST to its answer (every copy restored and ready), the copies checked and deleted. */
async function forkMs(t: Target, sid: string, count: number): Promise<number> {
  const t0 = performance.now()
  const r = await call(t, 'POST', `/v1/sessions/${sid}/fork`, { count })
  const ms = performance.now() - t0
  if (r.status !== 201 || r.body?.sessions?.length !== count) throw new Error(`fork of ${count} answered ${r.status}: ${JSON.stringify(r.body)}`)
  const copies = (r.body.sessions as Array<{ id: string }>).map((s) => s.id)
  const outs = await Promise.all(copies.map((c) => stdoutOf(t, c, 'print(x)')))
  if (outs.some((o) => o !== '1\n')) throw new Error(`a copy lost the parent's state: ${JSON.stringify(outs)}`)
  await Promise.all(copies.map((c) => deleteSession(t, c)))
  return ms
}

async function stdoutOf(t: Target, sid: string, code: string): Promise<string> {
  let out = ''
  await execute(t, sid, code, {
    onEvent: (e) => {
      if (e.event === 'stdout') out += (e.data as { text?: string }).text ?? ''
    },
  })
  return out
}

/** ms from a print(1)'s POST to its first stdout. */
async function firstOutput(t: Target, sid: string): Promise<number> {
  let first = NaN
  const r = await execute(t, sid, 'print(1)', {
    onEvent: (e) => {
      if (e.event === 'stdout' && Number.isNaN(first)) first = e.at
    },
  })
  return first - r.t0
}

/**
 * One snapshot of a running session: the pause as a client sees it (snapshot POST sent -> first output of
 * a print(1) sent PROBE_AFTER_MS later, less that print(1)'s usual time) and the snapshot request's own time.
 */
async function snapshotPause(t: Target, sid: string, usual: number): Promise<{ pause: number; request: number }> {
  const t0 = performance.now()
  const snap = call(t, 'POST', `/v1/sessions/${sid}/snapshots`, {})
  await new Promise((resolve) => setTimeout(resolve, PROBE_AFTER_MS))
  const probe = firstOutput(t, sid)
  const s = await snap
  const request = performance.now() - t0
  const waited = await probe
  if (s.status !== 201) throw new Error(`snapshot answered ${s.status}: ${JSON.stringify(s.body)}`)
  await call(t, 'DELETE', `/v1/snapshots/${(s.body as { id: string }).id}`)
  return { pause: PROBE_AFTER_MS + waited - usual, request }
}

/** `serverPauses`: the pauses the server logs, filled as it logs them (a cross-check of the outside figure). */
export async function forkAndSnapshot(report: Report, s: Target, bare: { hibernate: number; wake: number }, serverPauses: number[]): Promise<void> {
  const sid = await createSession(s)
  try {
    await stdoutOf(s, sid, 'x = 1')
    const ones: number[] = []
    for (let i = 0; i < ROUNDS; i++) ones.push(await forkMs(s, sid, 1))
    report.add(G, 'fork count 1 p50', summarize(ones).median, 'ms', {
      baseline: { name: 'bare wake to first output p50', value: bare.wake },
      ratio: 'ours/baseline',
      ratioName: 'fork / wake',
      target: 'p50 <= 1000 ms',
      met: summarize(ones).median <= 1000,
      note: `n=${ROUNDS}: ${ones.map((v) => v.toFixed(0)).join(', ')} ms`,
    })
    const eights: number[] = []
    for (let i = 0; i < EIGHT_ROUNDS; i++) eights.push(await forkMs(s, sid, 8))
    const worst = Math.max(...eights)
    report.add(G, 'fork count 8 (slowest)', worst, 'ms', {
      baseline: { name: 'bare wake to first output p50', value: bare.wake },
      ratio: 'ours/baseline',
      ratioName: 'fork of 8 / one wake',
      target: '<= 3000 ms',
      met: worst <= 3000,
      note: `n=${EIGHT_ROUNDS}: ${eights.map((v) => v.toFixed(0)).join(', ')} ms`,
    })

    const usual: number[] = []
    for (let i = 0; i < 5; i++) usual.push(await firstOutput(s, sid))
    const pauses: number[] = []
    const requests: number[] = []
    const logged = serverPauses.length
    for (let i = 0; i < ROUNDS; i++) {
      const p = await snapshotPause(s, sid, summarize(usual).median)
      pauses.push(p.pause)
      requests.push(p.request)
    }
    const pause = summarize(pauses).median
    report.add(G, 'snapshot of a running session: pause p50', pause, 'ms', {
      baseline: { name: 'bare hibernate p50', value: bare.hibernate },
      ratio: 'ours/baseline',
      ratioName: 'pause / hibernate',
      target: 'p50 <= 500 ms',
      met: pause <= 500,
      note: `a print(1) sent ${PROBE_AFTER_MS} ms after the snapshot's POST: POST -> its first output, less print(1)'s usual ${summarize(usual).median.toFixed(0)} ms; n=${ROUNDS}`,
    })
    report.add(G, 'snapshot of a running session: request p50', summarize(requests).median, 'ms', {
      note: 'POST .../snapshots -> 201',
    })
    report.add(G, 'snapshot of a running session: pause p50 as the server logs it', summarize(serverPauses.slice(logged)).median, 'ms', {
      note: 'sessions/snapshots.ts pauseMs: from the start of its hibernation until woken again (checkpoint + restore)',
    })
  } finally {
    await deleteSession(s, sid)
  }
}
