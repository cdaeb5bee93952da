// The replcast server (src/server.ts) as a process of its own for the benchmarks of issue 11, so the
// client (this process) never shares its event loop; with its own key prefix and deployment, and what
// a benchmark reads of it: CPU time and RSS from /proc, Redis CPU time and the bytes its keys hold.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { Redis } from 'ioredis'
import { createServer } from 'node:net'
import { removeDeployment } from './cleanup.js'

const ROOT = fileURLToPath(new URL('../', import.meta.url))
/**
 * The server is run as `npm start` runs it, compiled (src/ → .tmp-bench/ by tsc, once per benchmark
 * run): under the TypeScript loader its RSS would carry the compiler (about 150 MB more). The folder
 * sits one level under the root as dist/ does, so paths the server finds from its own file resolve.
 * BENCH_SERVER=ts runs src/server.ts under this process's loader instead (no build).
 */
const BUILD = `${ROOT}.tmp-bench/`
let built = false

function build(): void {
  if (built || process.env.BENCH_SERVER === 'ts') return
  rmSync(BUILD, { recursive: true, force: true })
  const t0 = performance.now()
  try {
    execFileSync(process.execPath, [`${ROOT}node_modules/typescript/bin/tsc`, '-p', `${ROOT}tsconfig.json`, '--outDir', BUILD], { stdio: 'pipe' })
  } catch (err) {
    // Type errors still emit JavaScript: someone's work in progress should not stop a benchmark.
    const out = String((err as { stdout?: Buffer }).stdout ?? '')
    if (!existsSync(`${BUILD}server.js`)) throw new Error(`tsc built no server: ${out.slice(0, 2000)}`)
    console.log(`  (tsc reported errors, JavaScript emitted anyway: ${out.split('\n')[0]})`)
  }
  console.log(`  (server built into .tmp-bench/ in ${((performance.now() - t0) / 1000).toFixed(1)} s)`)
  built = true
}
const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'

export interface BenchServer {
  base: string
  pid: number
  prefix: string
  deployment: string
  /** authorization and content-type for JSON requests. */
  headers: Record<string, string>
  /** The benchmark's own Redis connection (INFO, SCAN, MEMORY USAGE). */
  redis: Redis
  close(): Promise<void>
}

/** A port nobody listens on now. (test/helpers/server-process.ts has one too, but importing it loads the whole app.) */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const a = s.address()
      s.close(() => resolve(typeof a === 'object' && a ? a.port : 0))
    })
    s.on('error', reject)
  })
}

/**
 * Starts a server with limits no benchmark should meet (rate, sessions, concurrent executions), cold
 * sandboxes (no pool) of 256 MiB so that 50-100 sessions fit the host's memory share, and `env` on top.
 * `onLine` gets each line the server prints (its log: figures it alone can see, such as phases).
 */
export async function startServer(env: Record<string, string> = {}, opts: { onLine?: (line: string) => void } = {}): Promise<BenchServer> {
  const tag = randomBytes(4).toString('hex')
  const key = `bench-key-${tag}`
  const prefix = `replcast-bench-${tag}:`
  const deployment = `bench-${tag}`
  build()
  const port = await freePort()
  // BENCH_SERVER_NODE_ARGS: node's own flags for the server, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof".
  const nodeArgs = (process.env.BENCH_SERVER_NODE_ARGS ?? '').split(' ').filter(Boolean)
  const args = [...nodeArgs, ...(process.env.BENCH_SERVER === 'ts' ? [...process.execArgv, `${ROOT}src/server.ts`] : [`${BUILD}server.js`])]
  const child: ChildProcess = spawn(process.execPath, args, {
    env: {
      ...process.env,
      // Under the loader (BENCH_SERVER=ts), transpiled only: type errors are tsc's to report.
      TS_NODE_TRANSPILE_ONLY: '1',
      HOST: '127.0.0.1',
      PORT: String(port),
      REDIS_URL,
      REPLCAST_API_KEYS: `bench=${key}`,
      REPLCAST_KEY_PREFIX: prefix,
      REPLCAST_DEPLOYMENT: deployment,
      REPLCAST_INSTANCE_ID: `bench-${tag}`,
      LOG_LEVEL: 'warn',
      SANDBOX_POOL_SIZE: '0',
      // The figures of docs/performance.md are runc's, beside runc baselines; `runtimes` and `hibernate` name runsc.
      SANDBOX_RUNTIME: 'runc',
      SANDBOX_MEMORY_MB: '256',
      TENANT_MAX_SESSIONS: '5000',
      TENANT_RATE_PER_MIN: '1000000000',
      TENANT_MAX_CONCURRENT_EXECUTIONS: '5000',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  let partial = ''
  const keep = (b: Buffer) => {
    output = (output + b.toString()).slice(-20000)
  }
  // The log is on stdout, one JSON object a line.
  child.stdout!.on('data', (b: Buffer) => {
    keep(b)
    if (!opts.onLine) return
    const lines = (partial + b.toString()).split('\n')
    partial = lines.pop() ?? ''
    for (const l of lines) opts.onLine(l)
  })
  child.stderr!.on('data', keep)
  const base = `http://127.0.0.1:${port}`
  const end = Date.now() + 60_000
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the server exited (${child.exitCode}): ${output}`)
    if (Date.now() > end) throw new Error(`the server did not answer /healthz within 60 s: ${output}`)
    const ok = await fetch(`${base}/healthz`).then(
      (r) => r.ok,
      () => false,
    )
    if (ok) break
    await new Promise((r) => setTimeout(r, 100))
  }
  const redis = new Redis(REDIS_URL)
  return {
    base,
    pid: child.pid!,
    prefix,
    deployment,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    redis,
    async close() {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((r) => child.once('exit', r))
        child.kill('SIGTERM')
        const t = setTimeout(() => child.kill('SIGKILL'), 15_000)
        await exited
        clearTimeout(t)
      }
      // What the server printed at warn level or above is worth seeing (a benchmark may have caused it).
      const warnings = output.split('\n').filter((l) => /"level":(4|5|6)0/.test(l))
      if (warnings.length) console.log(`  (server logged ${warnings.length} warnings/errors; last: ${warnings.at(-1)!.slice(0, 300)})`)
      await removeDeployment(deployment, prefix, REDIS_URL)
      redis.disconnect()
    },
  }
}

/** CPU time (user + system) the process has used, in ms. */
export function cpuMs(pid: number): number {
  // Fields after the command name (which may hold spaces): state is the 3rd field, utime the 14th.
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return ((Number(f[11]) + Number(f[12])) * 1000) / CLK_TCK
}

/** CPU time of the whole machine (every core, ms), and of the processes that carry sandbox I/O, by their command name. */
export interface MachineCpu {
  busyMs: number
  dockerdMs: number
  /** containerd and the containerd shims (one per container). */
  containerdMs: number
  /** The sandboxes' Python processes (the REPLs). */
  sandboxMs: number
}

export function machineCpu(): MachineCpu {
  const [user, nice, system, , , irq, softirq, steal] = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number)
  const out = { busyMs: ((user! + nice! + system! + irq! + softirq! + steal!) * 1000) / CLK_TCK, dockerdMs: 0, containerdMs: 0, sandboxMs: 0 }
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    let comm = ''
    let ms = 0
    try {
      comm = readFileSync(`/proc/${pid}/comm`, 'utf8').trim()
      ms = comm === 'dockerd' || comm.startsWith('containerd') || comm === 'python3' ? cpuMs(Number(pid)) : 0
    } catch {
      continue // gone meanwhile
    }
    if (comm === 'dockerd') out.dockerdMs += ms
    else if (comm.startsWith('containerd')) out.containerdMs += ms
    else if (comm === 'python3') out.sandboxMs += ms
  }
  return out
}

export function rssBytes(pid: number): number {
  return Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) * 1024
}

/** Redis's CPU time (user + system, all its threads) in ms, from INFO cpu. */
export async function redisCpuMs(redis: Redis): Promise<number> {
  const info = await redis.info('cpu')
  const get = (name: string) => Number(new RegExp(`^${name}:([0-9.]+)`, 'm').exec(info)?.[1] ?? NaN)
  return (get('used_cpu_sys') + get('used_cpu_user')) * 1000
}

/** Bytes Redis holds for the keys under `prefix` (MEMORY USAGE, every element sampled) and how many keys. */
export async function redisBytes(redis: Redis, prefix: string): Promise<{ bytes: number; keys: number }> {
  let cursor = '0'
  let bytes = 0
  let keys = 0
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000)
    cursor = next
    if (batch.length) {
      const p = redis.pipeline()
      for (const k of batch) p.call('MEMORY', 'USAGE', k, 'SAMPLES', '0')
      for (const [, v] of (await p.exec()) ?? []) bytes += Number(v ?? 0)
      keys += batch.length
    }
  } while (cursor !== '0')
  return { bytes, keys }
}

/** Samples `read()` every `everyMs` until stop() is called; stop() answers the largest value seen. */
export function sampleMax(read: () => number, everyMs = 20): { stop(): number } {
  let max = read()
  const t = setInterval(() => {
    try {
      max = Math.max(max, read())
    } catch {
      /* the process ended meanwhile */
    }
  }, everyMs)
  return {
    stop() {
      clearInterval(t)
      return max
    },
  }
}
