// Issue 11, round trip: print(1) by HTTP POST + SSE until `done` from this (client) process to the
// server process, next to the same run's floors: a bare local Jupyter kernel over ZMQ (bench/jupyter.py),
// a kept-alive GET /healthz, a raw docker-attach echo, and the REPL protocol alone over attach, also
// with a Redis round trip before and after each execution (the floor of recording its start, then its end).
import type { Redis } from 'ioredis'
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { pino } from 'pino'
import { ReplClient } from '../src/repl/repl-client.js'
import { DockerSandboxDriver } from '../src/sandbox/docker-driver.js'
import { createSession, healthz, printOne, type Target } from './client.js'
import { benchSpec, removeRaw, startRaw } from './raw-docker.js'
import type { Report } from './report.js'
import { startServer } from './server.js'
import { summarize } from './stats.js'

const ROUNDS = Math.max(500, Number(process.env.BENCH_ROUNDS ?? 500))
const WARMUP = 50
const JUPYTER = fileURLToPath(new URL('./jupyter.py', import.meta.url))
/** Debian's python3, where python3-ipykernel and python3-jupyter-client install (scripts/bench.sh). */
const DEBIAN_PYTHON = process.env.BENCH_JUPYTER_PYTHON ?? '/usr/bin/python3'

async function rounds(fn: () => Promise<number | void>, n = ROUNDS, warmup = WARMUP): Promise<number[]> {
  const out: number[] = []
  for (let i = 0; i < n + warmup; i++) {
    const t0 = performance.now()
    const v = await fn()
    if (i >= warmup) out.push(typeof v === 'number' ? v : performance.now() - t0)
  }
  return out
}

/** print(1) execute→idle on a bare Jupyter kernel, in ms; null when the Debian packages are missing. */
export async function jupyterSamples(n = ROUNDS): Promise<number[] | null> {
  const child = spawn(DEBIAN_PYTHON, [JUPYTER, String(n), String(WARMUP)], { stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  child.stdout.on('data', (b: Buffer) => (out += b.toString()))
  child.stderr.on('data', (b: Buffer) => (err += b.toString()))
  const code = await new Promise<number | null>((r) => child.on('close', r))
  if (code !== 0) {
    console.log(`  jupyter baseline failed (exit ${code}): ${err.trim().split('\n').slice(-3).join(' / ')}`)
    return null
  }
  return (JSON.parse(out) as { samples_ms: number[] }).samples_ms
}

async function attachEcho(deployment: string): Promise<number[]> {
  const raw = await startRaw(deployment, 'runc', ['cat'])
  try {
    let i = 0
    return await rounds(() => raw.echo(`ping ${i++}`))
  } finally {
    await raw.remove()
  }
}

/**
 * The REPL protocol alone: the host's ReplClient in this process on a sandbox it made, print(1) until
 * done; then the same with a Redis PING before and after each execution, as a server waits for Redis
 * to record an execution's start before it runs and its end before the client hears of it.
 */
async function replProtocol(deployment: string, redis: Redis): Promise<{ alone: number[]; withRedis: number[] }> {
  const log = pino({ level: 'silent' })
  const driver = new DockerSandboxDriver('', log)
  const h = await driver.create(benchSpec(deployment, 'runc'))
  const client = new ReplClient(h.transport, log, { readyTimeoutMs: 30000 })
  try {
    await client.ready
    let i = 0
    const print = () =>
      new Promise<void>((resolve) =>
        client.execute(`x${i++}`, 'print(1)', (f) => {
          if (f.type === 'done') resolve()
        }),
      )
    const alone = await rounds(print)
    const withRedis = await rounds(async () => {
      await redis.ping()
      await print()
      await redis.ping()
    })
    return { alone, withRedis }
  } finally {
    client.close()
    await driver.remove(h.containerId)
  }
}

export async function latency(report: Report): Promise<void> {
  const G = 'latency'
  const server = await startServer()
  const raw = `${server.deployment}-raw`
  try {
    const t: Target = server
    const sid = await createSession(t)
    const http = await rounds(() => printOne(t, sid))
    const health = await rounds(() => healthz(t))
    const echo = await attachEcho(raw)
    const repl = await replProtocol(raw, server.redis)
    const jupyter = await jupyterSamples()
    const ours = summarize(http)
    console.log(`  (${ROUNDS} rounds each after ${WARMUP} warm-up; client and server are separate processes)`)
    if (jupyter) {
      const j = summarize(jupyter)
      report.add(G, 'print(1) HTTP POST + SSE until done, p50', ours.median, 'ms', {
        baseline: { name: 'bare Jupyter kernel p50', value: j.median },
        ratio: 'baseline/ours',
        ratioName: 'jupyter / ours',
        target: '<= 1.0 ms and jupyter/ours >= 4',
        met: ours.median <= 1.0 && j.median / ours.median >= 4,
      })
      report.add(G, 'print(1) HTTP POST + SSE until done, p99', ours.p99, 'ms', {
        baseline: { name: 'bare Jupyter kernel p99', value: j.p99 },
        ratio: 'baseline/ours',
        ratioName: 'jupyter / ours',
        target: '<= 3 ms and < jupyter p99',
        met: ours.p99 <= 3 && ours.p99 < j.p99,
      })
    } else {
      report.note(G, 'no Jupyter baseline (python3-ipykernel/python3-jupyter-client missing for /usr/bin/python3)')
      report.add(G, 'print(1) HTTP POST + SSE until done, p50', ours.median, 'ms', { target: '<= 1.0 ms', met: ours.median <= 1.0 })
      report.add(G, 'print(1) HTTP POST + SSE until done, p99', ours.p99, 'ms', { target: '<= 3 ms', met: ours.p99 <= 3 })
    }
    const h = summarize(health)
    const e = summarize(echo)
    const r = summarize(repl.alone)
    const rr = summarize(repl.withRedis)
    const base = (name: string, value: number) => ({ baseline: { name, value }, ratio: 'ours/baseline' as const })
    report.add(G, 'print(1) HTTP+SSE p50 vs keep-alive GET /healthz p50', ours.median, 'ms', base('GET /healthz p50', h.median))
    report.add(G, 'print(1) HTTP+SSE p99 vs keep-alive GET /healthz p99', ours.p99, 'ms', base('GET /healthz p99', h.p99))
    report.add(G, 'print(1) HTTP+SSE p50 vs raw docker-attach echo p50', ours.median, 'ms', base('attach echo p50', e.median))
    report.add(G, 'print(1) HTTP+SSE p99 vs raw docker-attach echo p99', ours.p99, 'ms', base('attach echo p99', e.p99))
    report.add(G, 'print(1) HTTP+SSE p50 vs REPL protocol alone p50', ours.median, 'ms', {
      ...base('ReplClient over attach p50', r.median),
      note: 'the host REPL client in the client process: no HTTP, no Redis',
    })
    report.add(G, 'print(1) HTTP+SSE p99 vs REPL protocol alone p99', ours.p99, 'ms', base('ReplClient over attach p99', r.p99))
    report.add(G, 'print(1) HTTP+SSE p50 vs REPL protocol between two Redis round trips p50', ours.median, 'ms', {
      ...base('PING, ReplClient print(1), PING p50', rr.median),
      note: 'the floor of waiting for Redis before and after running, with no HTTP and no work in Redis',
    })
  } finally {
    await server.close()
    await removeRaw(raw)
  }
}
