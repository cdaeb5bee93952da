// Issue 11, bulk output: one execution writing 50 MiB to stdout in 64 KiB writes, read by one SSE
// client: MB/s and the API's RSS growth; baseline: python3 on the host writing the same into a pipe.
// Then a slow client (reading ~1 MB/s for a few seconds): the API's RSS must stay bounded.
import { spawn } from 'node:child_process'
import { availableParallelism } from 'node:os'
import { call, createSession, deleteSession, execute, type Target } from './client.js'
import type { Report } from './report.js'
import { cpuMs, machineCpu, redisBytes, redisCpuMs, rssBytes, sampleMax, startServer } from './server.js'

const CHUNKS = 800
const BYTES = CHUNKS * 65536
const CODE = `import sys\nb = 'x' * 65535 + '\\n'\nfor _ in range(${CHUNKS}):\n    sys.stdout.write(b)\nsys.stdout.flush()`
const SLOW_MS = 5000
const MB = 1e6
const MiB = 1024 * 1024

/** python3 on the host writing the same bytes into a pipe this process reads: MB/s from its first byte to its end. */
async function hostPipe(): Promise<number> {
  const child = spawn('python3', ['-c', CODE], { stdio: ['ignore', 'pipe', 'inherit'] })
  let first = 0
  let n = 0
  child.stdout.on('data', (b: Buffer) => {
    first ||= performance.now()
    n += b.length
  })
  await new Promise((r) => child.on('close', r))
  if (n !== BYTES) throw new Error(`the host python wrote ${n} bytes, not ${BYTES}`)
  return n / MB / ((performance.now() - first) / 1000)
}

export async function bulk(report: Report): Promise<void> {
  const G = 'bulk'
  const server = await startServer()
  try {
    const t: Target = server
    const body = { limits: { output_bytes: BYTES + MiB } }
    const sid = await createSession(t, body)
    let text = 0
    let limits = 0
    const rss0 = rssBytes(server.pid)
    const peak = sampleMax(() => rssBytes(server.pid))
    const cpu0 = { api: cpuMs(server.pid), redis: await redisCpuMs(server.redis), client: process.cpuUsage(), machine: machineCpu() }
    const run = await execute(t, sid, CODE, {
      timeout_s: 300,
      onEvent: (e) => {
        if (e.event === 'stdout') text += String((e.data as { text?: string }).text ?? '').length
        else if (e.event === 'limit') limits++
      },
    })
    const grew = (peak.stop() - rss0) / MiB
    const client = process.cpuUsage(cpu0.client)
    const m = machineCpu()
    const apiMs = cpuMs(server.pid) - cpu0.api
    const redisMs = (await redisCpuMs(server.redis)) - cpu0.redis
    const cpu = [
      ['API', apiMs],
      ['Redis', redisMs],
      ['client', (client.user + client.system) / 1000],
      ['dockerd', m.dockerdMs - cpu0.machine.dockerdMs],
      ['containerd and shims', m.containerdMs - cpu0.machine.containerdMs],
      ["the sandbox's python", m.sandboxMs - cpu0.machine.sandboxMs],
    ] as const
    const seconds = (run.doneAt - run.t0) / 1000
    const cores = availableParallelism()
    const rate = text / MB / seconds
    const pipe = await hostPipe()
    console.log(`  (${(text / MiB).toFixed(1)} of ${BYTES / MiB} MiB of stdout reached the client in ${seconds.toFixed(2)} s; ${limits} limit events)`)
    console.log(
      `  (CPU for it: ${cpu.map(([who, ms]) => `${who} ${ms.toFixed(0)} ms`).join(', ')}; the machine ${(m.busyMs - cpu0.machine.busyMs).toFixed(0)} ms on ${cores} cores)`,
    )
    report.add(G, 'stdout of one 50 MiB execution to one SSE client', rate, 'MB/s', {
      baseline: { name: 'python3 on the host into a pipe', value: pipe },
      ratio: 'ours/baseline',
      target: '>= 100 MB/s',
      met: rate >= 100 && text === BYTES,
    })
    // The most these cores allow whatever the API and Redis cost (the sandbox I/O path, the REPL, the client, the kernel).
    const rest = m.busyMs - cpu0.machine.busyMs - apiMs - redisMs
    report.add(G, 'MB/s these cores allow with the API and Redis costing nothing', text / MB / (rest / cores / 1000), 'MB/s', {
      note: `${cores} cores / the ${rest.toFixed(0)} ms of CPU the rest of the machine spent on it`,
    })
    report.add(G, 'API RSS growth during it', grew, 'MiB', { baseline: { name: 'API RSS before', value: rss0 / MiB }, target: '<= 50 MiB', met: grew <= 50 })

    // A slow client: reads ~1 MB/s for SLOW_MS, then leaves; the execution is ended with its session.
    // Where the output the client has not read went: still in the sandbox (its session busy when the
    // client leaves) or written ahead of the client (into Redis, counted under the server's prefix).
    await deleteSession(t, sid)
    const slow = await createSession(t, body)
    const redis1 = await redisBytes(server.redis, server.prefix)
    const rss1 = rssBytes(server.pid)
    const peak2 = sampleMax(() => rssBytes(server.pid))
    const got = await execute(t, slow, CODE, { timeout_s: 300, bytesPerSecond: MB, abortAfterMs: SLOW_MS })
    const grew2 = (peak2.stop() - rss1) / MiB
    const state = (await call(t, 'GET', `/v1/sessions/${slow}`)).body as { status?: string }
    const redisGrew = ((await redisBytes(server.redis, server.prefix)).bytes - redis1.bytes) / MB
    await deleteSession(t, slow)
    report.add(G, `API RSS growth, a client reading ~1 MB/s for ${SLOW_MS / 1000} s`, grew2, 'MiB', {
      target: '<= 50 MiB (bounded)',
      met: grew2 <= 50,
      note: `it read ${(got.bytes / MB).toFixed(1)} MB of SSE; then the session was ${state.status}, Redis held ${redisGrew.toFixed(1)} MB more`,
    })
  } finally {
    await server.close()
  }
}
