// The seeded chaos soak (issue 31): several API instances on one private Redis under steady stateful
// load, one fault every few seconds, every execution held to the contract as its client received it,
// and at the end every session answering through every instance and nothing left after delete.
// Run by test/chaos/run.ts (npm run soak -- chaos) and, short, by test/chaos/chaos.test.ts.
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { rng } from '../fuzz/random.js'
import { ChaosClient } from './client.js'
import { Cluster, type ServerBuild } from './cluster.js'
import type { ChaosSession, Seen } from './execution-check.js'
import { FAULT_KINDS, Faults, type FaultKind } from './faults.js'
import { finalChecks } from './final-checks.js'
import { runSession } from './session-loop.js'
import { recheckStored } from './stored-check.js'
import { Tally } from './tally.js'

export interface ChaosOptions {
  seed: number
  /** How long the load runs, in seconds. */
  seconds: number
  sessions: number
  instances: number
  /** One fault every this many seconds (the first one after as long). */
  faultEveryS: number
  /** The sleep between each execution's two lines, in seconds. */
  sleepS: number
  /** The kinds of fault to inject, in a seeded order. */
  kinds: readonly FaultKind[]
  /** The instances' LEASE_TTL_MS (their heartbeat is a sixth of it, at most 1 s as by default: a silent instance is gone after three). */
  leaseTtlMs: number
  /** dist: the instances run src/ compiled first (as npm start does; they start in a second); src: through the TypeScript loader. */
  build: ServerBuild
  /** Where the instances' logs go (a folder of its own per run). */
  logDir: string
  log: (line: string) => void
}

const ROOT = fileURLToPath(new URL('../../', import.meta.url))

/** The options, from CHAOS_* variables in `env` over the defaults (the run: 240 s, 6 sessions, 2 instances, 15 s). */
export function chaosOptions(env: NodeJS.ProcessEnv, defaults: Partial<ChaosOptions> = {}): ChaosOptions {
  const num = (name: string, fallback: number) => {
    const v = env[name]
    if (v === undefined || v === '') return fallback
    const n = Number(v)
    if (!Number.isFinite(n) || n < 0) throw new Error(`${name} must be a number, not ${JSON.stringify(v)}`)
    return n
  }
  const seed = num('CHAOS_SEED', defaults.seed ?? randomBytes(4).readUInt32LE() % 1e9)
  const kinds = env.CHAOS_FAULTS ? env.CHAOS_FAULTS.split(',').map((k) => k.trim()) : (defaults.kinds ?? FAULT_KINDS)
  for (const k of kinds)
    if (!(FAULT_KINDS as readonly string[]).includes(k)) throw new Error(`CHAOS_FAULTS: unknown fault ${k} (known: ${FAULT_KINDS.join(', ')})`)
  return {
    seed,
    seconds: num('CHAOS_SECONDS', defaults.seconds ?? 240),
    sessions: num('CHAOS_SESSIONS', defaults.sessions ?? 6),
    instances: Math.max(2, num('CHAOS_INSTANCES', defaults.instances ?? 2)),
    faultEveryS: num('CHAOS_FAULT_S', defaults.faultEveryS ?? 15),
    sleepS: num('CHAOS_SLEEP_S', defaults.sleepS ?? 0.1),
    kinds: kinds as FaultKind[],
    leaseTtlMs: num('CHAOS_LEASE_TTL_MS', defaults.leaseTtlMs ?? 15_000),
    build: env.CHAOS_BUILD === 'src' || env.CHAOS_BUILD === 'dist' ? env.CHAOS_BUILD : (defaults.build ?? 'dist'),
    logDir: env.CHAOS_LOG_DIR ?? defaults.logDir ?? join(ROOT, '.replcast', `chaos-${seed}-${Date.now()}`),
    log: defaults.log ?? console.log,
  }
}

export interface ChaosReport {
  tally: Tally
  lines: string[]
}

export async function runChaos(o: ChaosOptions): Promise<ChaosReport> {
  o.log(
    `chaos: seed ${o.seed}, ${o.seconds} s, ${o.sessions} sessions, ${o.instances} instances, a fault every ${o.faultEveryS} s, lease TTL ${o.leaseTtlMs} ms, ${o.build} build ` +
      `(${o.kinds.join(', ')}); logs in ${o.logDir} (replay: CHAOS_SEED=${o.seed} npm run soak -- chaos)`,
  )
  const cluster = await Cluster.start({
    instances: o.instances,
    build: o.build,
    logDir: o.logDir,
    env: {
      LEASE_TTL_MS: String(o.leaseTtlMs),
      REAPER_INTERVAL_MS: '500',
      INSTANCE_HEARTBEAT_MS: String(Math.max(100, Math.min(1000, Math.floor(o.leaseTtlMs / 6)))),
      SSE_HEARTBEAT_MS: '1000',
      // The load is one tenant's: its rate and slots must not be what limits it.
      TENANT_RATE_PER_MIN: '1000000',
      TENANT_MAX_CONCURRENT_EXECUTIONS: '1000',
      TENANT_MAX_SESSIONS: String(o.sessions + 10),
    },
  })
  let tally = new Tally(o.log)
  try {
    const client = new ChaosClient(tally)
    const labels = rng(o.seed, 1)
    const sessions: ChaosSession[] = []
    for (let i = 0; i < o.sessions; i++) {
      const res = await client.send(`${cluster.next()}/v1/sessions`, { method: 'POST', json: {} })
      if (res.kind !== 'answer' || res.res.status !== 201) throw new Error(`creating session ${i} failed: ${res.kind === 'answer' ? res.res.status : res.kind}`)
      const sid = ((await res.res.json()) as { id: string }).id
      const label = `${labels.chars(1, 'abcdefghijklmnopqrstuvwxyz')}${labels.chars(5, 'abcdefghijklmnopqrstuvwxyz0123456789')}`
      sessions.push({ index: i, label, sid, sandboxKills: 0, killsAtRestart: 0, last: undefined, allowance: 0, lost: false })
    }
    // Counting starts with the load: what came before was set-up.
    tally = new Tally(o.log)
    const load = new ChaosClient(tally)
    const t0 = performance.now()
    const endAt = t0 + o.seconds * 1000
    const over = () => performance.now() >= endAt
    const seen: Seen[] = []
    const loops = sessions.map((s) => runSession(s, { client: load, tally, next: () => cluster.next(), over, sleepS: o.sleepS, seen }))
    const faults = new Faults(cluster, sessions, tally, rng(o.seed, 0), o.kinds)
    for (let k = 1; k * o.faultEveryS < o.seconds; k++) {
      await new Promise((r) => setTimeout(r, Math.max(0, t0 + k * o.faultEveryS * 1000 - performance.now())))
      await faults.inject()
    }
    await Promise.all(loops)
    await faults.settle()
    o.log(`  ${tally.now().toFixed(1)} s load over; ${tally.executions} executions; the end's checks`)
    await recheckStored(seen, () => cluster.next(), load, tally)
    await finalChecks(cluster, sessions, load, tally)
  } finally {
    await cluster.destroy()
  }
  const lines = tally.summary()
  return { tally, lines }
}
