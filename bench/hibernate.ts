// Issue 34's figures (npm run bench -- hibernate): hibernate and wake-to-first-output of a bare
// session and of one holding numpy, pandas and 100 MB of random floats, each against a raw `docker
// checkpoint create` / `docker start --checkpoint` of a container with the same flags in the same
// state, in the same run (bench/raw-checkpoint.ts); each phase as the server logs it; what a
// hibernated session costs at rest; BENCH_HIBERNATED sessions hibernated at once (disk, Redis and
// API RSS per session, a random one's wake); 20 woken at once; fork and snapshot (bench/fork-snapshot.ts). DOCKER_HOST must name an engine
// that can checkpoint (experimental mode, runsc): scripts/setup.sh turns it on for the local one.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Docker from 'dockerode'
import { call, createSession, deleteSession, execute, inBatches, type Target } from './client.js'
import { forkAndSnapshot } from './fork-snapshot.js'
import { containerMemory, SANDBOX_MEMORY_MB } from './raw-docker.js'
import { folderBytes, startRawPython, type RawPython } from './raw-checkpoint.js'
import type { Report } from './report.js'
import { redisBytes, rssBytes, startServer, type BenchServer } from './server.js'
import { summarize } from './stats.js'
import { containerName } from '../src/sandbox/container-spec.js'

const ROUNDS = Number(process.env.BENCH_HIBERNATE_ROUNDS ?? 10)
const HEAVY_ROUNDS = Number(process.env.BENCH_HIBERNATE_HEAVY_ROUNDS ?? 4)
const MANY = Number(process.env.BENCH_HIBERNATED ?? 100)
const RANDOM_WAKES = 10
const AT_ONCE = 20
/** The heavy session's memory limit (numpy, pandas and 100 MB of floats need more than the usual 256 MiB). */
const HEAVY_MB = 512
const HEAVY_SETUP = "import numpy, pandas\nfloats = numpy.random.default_rng(7).random(12_500_000)\nframe = pandas.DataFrame({'x': floats[:100_000]})"
const G = 'hibernate'

type Phases = Record<string, number>

/** The phases the server logs for each hibernation and wake (sessions/hibernation.ts, sessions/wake.ts). */
class PhaseLog {
  readonly hibernated: Phases[] = []
  readonly woken: Phases[] = []
  /** Each hibernation's checkpoint bytes. */
  readonly bytes: number[] = []
  /** Each snapshot's pause as the server logs it (sessions/snapshots.ts). */
  readonly snapshotPauses: number[] = []
  take = (line: string): void => {
    if (!line.startsWith('{')) return
    try {
      const o = JSON.parse(line) as { msg?: string; ms?: Phases; bytes?: number; pauseMs?: number }
      if (o.msg === 'session hibernated' && o.ms) {
        this.hibernated.push(o.ms)
        this.bytes.push(o.bytes ?? NaN)
      }
      if (o.msg === 'session woken' && o.ms) this.woken.push(o.ms)
      if (o.msg === 'snapshot taken' && o.pauseMs !== undefined) this.snapshotPauses.push(o.pauseMs)
    } catch {
      /* not a log line */
    }
  }
}

/** Each phase's p50 over `list`, in the order the first entry names them. */
function phaseMedians(list: Phases[]): Array<[string, number]> {
  return Object.keys(list[0] ?? {}).map((k) => [k, summarize(list.map((p) => p[k] ?? NaN)).median])
}

const p50 = (xs: number[]) => summarize(xs).median

async function hibernateMs(t: Target, sid: string): Promise<number> {
  const t0 = performance.now()
  const r = await call(t, 'POST', `/v1/sessions/${sid}/hibernate`)
  if (r.status !== 200 || r.body?.status !== 'hibernated') throw new Error(`hibernate answered ${r.status}: ${JSON.stringify(r.body)}`)
  return performance.now() - t0
}

/** print(1) sent to a hibernated session: ms from the POST to its first stdout (the wake included). */
async function wakeToFirstOutput(t: Target, sid: string): Promise<number> {
  let first = NaN
  const r = await execute(t, sid, 'print(1)', {
    timeout_s: 120,
    onEvent: (e) => {
      if (e.event === 'stdout' && Number.isNaN(first)) first = e.at
    },
  })
  if (Number.isNaN(first)) throw new Error('print(1) after a wake printed nothing')
  return first - r.t0
}

interface Cycles {
  hibernate: number[]
  wake: number[]
}

/** `rounds` hibernate/wake cycles of one session after one not counted; the server's phases of the counted ones. */
async function ours(s: BenchServer, log: PhaseLog, sid: string, rounds: number): Promise<Cycles & { hPhases: Phases[]; wPhases: Phases[]; bytes: number[] }> {
  const out: Cycles = { hibernate: [], wake: [] }
  await hibernateMs(s, sid)
  await wakeToFirstOutput(s, sid)
  const [h0, w0] = [log.hibernated.length, log.woken.length]
  for (let i = 0; i < rounds; i++) {
    out.hibernate.push(await hibernateMs(s, sid))
    out.wake.push(await wakeToFirstOutput(s, sid))
  }
  return { ...out, hPhases: log.hibernated.slice(h0), wPhases: log.woken.slice(w0), bytes: log.bytes.slice(h0) }
}

async function raw(r: RawPython, rounds: number): Promise<Cycles & { start: number[]; bytes: number }> {
  const out = { hibernate: [] as number[], wake: [] as number[], start: [] as number[], bytes: NaN }
  await r.checkpoint()
  await r.restore()
  for (let i = 0; i < rounds; i++) {
    out.hibernate.push(await r.checkpoint())
    out.bytes = await r.checkpointBytes()
    const w = await r.restore()
    out.wake.push(w.firstOutputMs)
    out.start.push(w.startMs)
  }
  return out
}

/** One state (bare or heavy): ours against the raw container, the phases, the bytes on disk. */
async function compare(
  report: Report,
  s: BenchServer,
  log: PhaseLog,
  what: {
    label: string
    sid: string
    raw: RawPython
    rounds: number
    targets: { hibernate: (o: number, r: number) => [string, boolean]; wake: (o: number, r: number) => [string, boolean] }
  },
): Promise<{ hibernate: number; wake: number }> {
  const o = await ours(s, log, what.sid, what.rounds)
  const bytes = p50(o.bytes)
  const r = await raw(what.raw, what.rounds)
  const L = what.label
  const [oh, rh, ow, rw] = [p50(o.hibernate), p50(r.hibernate), p50(o.wake), p50(r.wake)]
  const [ht, hMet] = what.targets.hibernate(oh, rh)
  const [wt, wMet] = what.targets.wake(ow, rw)
  report.add(G, `${L}: hibernate p50`, oh, 'ms', {
    baseline: { name: 'raw docker checkpoint create p50', value: rh },
    ratio: 'ours/baseline',
    ratioName: 'ours / raw',
    target: ht,
    met: hMet,
  })
  report.add(G, `${L}: wake to first output p50`, ow, 'ms', {
    baseline: { name: 'raw docker start --checkpoint + print(1) p50', value: rw },
    ratio: 'ours/baseline',
    ratioName: 'ours / raw',
    target: wt,
    met: wMet,
  })
  report.add(G, `${L}: hibernate p99 / wake p99`, summarize(o.hibernate).p99, 'ms', {
    note: `wake p99 ${summarize(o.wake).p99.toFixed(0)} ms, n=${what.rounds}`,
  })
  report.add(G, `${L}: checkpoint on disk`, bytes / 1e6, 'MB', {
    baseline: { name: 'raw checkpoint', value: r.bytes / 1e6 },
    ratio: 'ours/baseline',
    ratioName: 'ours / raw',
  })
  for (const [k, v] of phaseMedians(o.hPhases)) report.add(G, `${L}: hibernate phase ${k} p50`, v, 'ms')
  const woken = phaseMedians(o.wPhases)
  for (const [k, v] of woken)
    report.add(
      G,
      `${L}: wake phase ${k} p50`,
      v,
      'ms',
      k === 'start' ? { baseline: { name: 'raw start --checkpoint p50', value: p50(r.start) }, ratio: 'ours/baseline', ratioName: 'ours / raw' } : {},
    )
  const total = woken.find(([k]) => k === 'total')?.[1] ?? NaN
  report.add(G, `${L}: wake phase first output (after the REPL answered) p50`, ow - total, 'ms', {
    note: 'wake to first output less the server-side wake: HTTP, queue, run, SSE',
  })
  return { hibernate: oh, wake: ow }
}

export async function hibernate(report: Report): Promise<void> {
  const info = (await new Docker().info()) as { ExperimentalBuild?: boolean; Runtimes?: Record<string, unknown> }
  if (!info.ExperimentalBuild || !info.Runtimes?.runsc) throw new Error('the engine at DOCKER_HOST cannot checkpoint (experimental mode and runsc are needed)')
  const dir = mkdtempSync(join(tmpdir(), 'rc-bench-cp-'))
  const store = join(dir, 'store')
  const log = new PhaseLog()
  const s = await startServer(
    { SANDBOX_RUNTIME: 'runsc', CHECKPOINT_DIR: store, LOG_LEVEL: 'info', TENANT_MAX_HIBERNATED_SESSIONS: String(MANY + 100), HIBERNATED_TTL_S: '86400' },
    { onLine: log.take },
  )
  const raws: RawPython[] = []
  try {
    // A bare session, against a bare Python loop.
    const bare = await createSession(s)
    await execute(s, bare, 'x = 1')
    const rawBare = await startRawPython(s.deployment, SANDBOX_MEMORY_MB)
    raws.push(rawBare)
    await rawBare.run('x = 1')
    const bareFigures = await compare(report, s, log, {
      label: 'bare',
      sid: bare,
      raw: rawBare,
      rounds: ROUNDS,
      targets: { hibernate: (o) => ['p50 <= 500 ms', o <= 500], wake: (o) => ['p50 <= 700 ms', o <= 700] },
    })
    await rawBare.remove()

    // Idle cost: the bare session awake, then hibernated.
    const awake = await containerMemory(containerName(bare))
    await hibernateMs(s, bare)
    const left = await new Docker().listContainers({ all: true, filters: { label: [`replcast.session=${bare}`] } })
    report.add(G, 'hibernated session: host memory', left.length ? NaN : 0, 'bytes', {
      baseline: { name: 'the same session awake', value: awake.stats },
      note: left.length ? `${left.length} container(s) left` : 'no container: no process, no memory',
    })
    report.add(G, 'hibernated session: processes', left.length, '')
    report.add(G, 'hibernated session: disk', await folderBytes(join(store, bare)), 'bytes')
    report.add(G, 'hibernated session: Redis', (await redisBytes(s.redis, `${s.prefix}{${bare}}`)).bytes, 'bytes', { note: 'its keys (record, executions)' })
    await deleteSession(s, bare)

    // numpy, pandas and 100 MB of random floats, against a Python loop holding the same.
    const heavy = await createSession(s, { limits: { memory_mb: HEAVY_MB } })
    await execute(s, heavy, HEAVY_SETUP, { timeout_s: 300 })
    const rawHeavy = await startRawPython(s.deployment, HEAVY_MB)
    raws.push(rawHeavy)
    await rawHeavy.run(HEAVY_SETUP)
    await compare(report, s, log, {
      label: 'numpy+pandas+100 MB',
      sid: heavy,
      raw: rawHeavy,
      rounds: HEAVY_ROUNDS,
      targets: { hibernate: (o, r) => ['<= 1.2x raw', o <= 1.2 * r], wake: (o, r) => ['<= 1.3x raw', o <= 1.3 * r] },
    })
    await rawHeavy.remove()
    await deleteSession(s, heavy)

    await many(report, s, store, bareFigures.wake)
    await forkAndSnapshot(report, s, bareFigures, log.snapshotPauses)
  } finally {
    for (const r of raws) await r.remove()
    await s.close()
    rmSync(dir, { recursive: true, force: true })
  }
}

/** MANY sessions hibernated: their cost per session, a random one's wake, AT_ONCE woken together. */
async function many(report: Report, s: BenchServer, store: string, wakeAt1: number): Promise<void> {
  const rss0 = rssBytes(s.pid)
  const redis0 = (await redisBytes(s.redis, s.prefix)).bytes
  const t0 = performance.now()
  const ids: string[] = []
  const settled = await inBatches(
    Array.from({ length: MANY }, (_, i) => i),
    4,
    async () => {
      const sid = await createSession(s)
      await hibernateMs(s, sid)
      ids.push(sid)
    },
  )
  const failed = settled.filter((r) => r.status === 'rejected')
  if (failed.length) report.note(G, `${failed.length} of ${MANY} create+hibernate failed; first: ${String((failed[0] as PromiseRejectedResult).reason)}`)
  const n = ids.length
  report.add(G, `${n} sessions created and hibernated (4 at a time)`, (performance.now() - t0) / 1000, 's')
  const metrics = await (await fetch(`${s.base}/metrics`)).text()
  report.add(G, 'replcast_hibernated_sessions (metrics)', Number(/^replcast_hibernated_sessions(?:\{[^}]*\})? (\d+)/m.exec(metrics)?.[1] ?? NaN), '')
  report.add(G, `hibernated x${n}: disk per session`, (await folderBytes(store)) / n / 1e6, 'MB')
  report.add(G, `hibernated x${n}: Redis per session`, ((await redisBytes(s.redis, s.prefix)).bytes - redis0) / n, 'bytes')
  report.add(G, `hibernated x${n}: API RSS`, rssBytes(s.pid) / 1e6, 'MB', {
    baseline: { name: 'before them', value: rss0 / 1e6 },
    ratio: 'ours/baseline',
    ratioName: 'after / before',
  })

  const pick = () => ids.splice(Math.floor(Math.random() * ids.length), 1)[0]!
  const random: number[] = []
  // The ones woken at once come from those left: MANY >= RANDOM_WAKES + AT_ONCE measures both.
  for (let i = 0; i < Math.min(RANDOM_WAKES, n - AT_ONCE); i++) random.push(await wakeToFirstOutput(s, pick()))
  report.add(G, `wake to first output p50, a random one of ${n} hibernated`, p50(random), 'ms', {
    baseline: { name: 'with 1 hibernated', value: wakeAt1 },
    ratio: 'ours/baseline',
    ratioName: `at ${n} / at 1`,
    note: `n=${random.length}`,
  })
  const batch = Array.from({ length: Math.min(AT_ONCE, ids.length) }, pick)
  const together = await Promise.all(batch.map((sid) => wakeToFirstOutput(s, sid)))
  const sum = summarize(together)
  report.add(G, `${batch.length} woken at once: wake to first output p99`, sum.p99, 'ms', {
    baseline: { name: 'one alone p50', value: wakeAt1 },
    ratio: 'ours/baseline',
    target: 'p99 <= 3000 ms',
    met: sum.p99 <= 3000,
    note: `p50 ${sum.median.toFixed(0)} ms`,
  })
}
