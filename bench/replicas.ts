// Replicas: three API server processes on one Redis, this process their client. The round trip of
// print(1) over HTTP+SSE through the session's holder and through another instance (same run), then
// failover: SIGKILL → first successful execution of a taken-over idle session, SIGKILL → `done` of a
// running execution, and SIGTERM → a survivor accepting code for the session.
// Run: npm run bench   (needs dockerd, Redis and the sandbox image: npm test sets them up)
import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { createServer } from 'node:net'
import { fileURLToPath } from 'node:url'
import { printOne } from './client.js'
import { removeDeployment } from './harness.js'
import { line, summarize } from './stats.js'

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 200)
/** Requests to one instance in a row, in the second order of the round-trip comparison. */
const BLOCK = 20
const FAILOVERS = Number(process.env.BENCH_FAILOVERS ?? 3)
const SERVER = fileURLToPath(new URL('../src/server.ts', import.meta.url))
const tag = randomBytes(4).toString('hex')
const key = `bench-key-${tag}`
const prefix = `replcast-bench-${tag}:`
const deployment = `bench-${tag}`
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
// Failover figures depend on these (the defaults are 15 s, 1 s, 1 s).
const TIMING = { LEASE_TTL_MS: '3000', REAPER_INTERVAL_MS: '500', INSTANCE_HEARTBEAT_MS: '500' }
const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' }

interface Server {
  url: string
  child: ChildProcess
}
const servers: Server[] = []
let serial = 0

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const a = s.address()
      s.close(() => resolve(typeof a === 'object' && a ? a.port : 0))
    })
  })
}

async function startServer(): Promise<Server> {
  const port = await freePort()
  const env = {
    ...process.env,
    ...TIMING,
    REPLCAST_API_KEYS: `bench=${key}`,
    REPLCAST_KEY_PREFIX: prefix,
    REPLCAST_DEPLOYMENT: deployment,
    REPLCAST_INSTANCE_ID: `bench-${tag}-${serial++}`,
    REDIS_URL: redisUrl,
    PORT: String(port),
    LOG_LEVEL: 'silent',
    SANDBOX_POOL_SIZE: '0',
    SANDBOX_RUNTIME: 'runc',
    TENANT_MAX_SESSIONS: '1000',
    TENANT_RATE_PER_MIN: '1000000',
  }
  const child = spawn(process.execPath, [...process.execArgv, SERVER], { env, stdio: 'ignore' })
  const url = `http://127.0.0.1:${port}`
  for (let i = 0; i < 600; i++) {
    if (child.exitCode !== null) break
    if (
      await fetch(`${url}/healthz`).then(
        (r) => r.ok,
        () => false,
      )
    )
      return { url, child }
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error('a server did not start')
}

async function stop(s: Server, signal: NodeJS.Signals): Promise<void> {
  if (s.child.exitCode !== null || s.child.signalCode !== null) return
  const exited = new Promise((r) => s.child.once('exit', r))
  s.child.kill(signal)
  await exited
}

async function createSession(base: string): Promise<string> {
  const r = await fetch(`${base}/v1/sessions`, { method: 'POST', headers, body: '{}' })
  return ((await r.json()) as { id: string }).id
}

/** POSTs code with Accept: text/event-stream; resolves with the response once its head arrived. */
function submit(base: string, sid: string, code: string): Promise<Response> {
  return fetch(`${base}/v1/sessions/${sid}/executions`, {
    method: 'POST',
    headers: { ...headers, accept: 'text/event-stream' },
    body: JSON.stringify({ code }),
  })
}

/** Reads an SSE body until an event line of `type` (or its end); true when it came. */
async function until(res: Response, type: string): Promise<boolean> {
  const reader = res.body!.getReader()
  const dec = new TextDecoder()
  let buf = ''
  for (;;) {
    const { done, value } = await reader.read()
    if (done) return false
    buf += dec.decode(value, { stream: true })
    if (buf.includes(`event: ${type}\n`)) {
      await reader.cancel()
      return true
    }
  }
}

/** print(1) over SSE through `base`, with the benchmarks' keep-alive client (bench/client.ts). */
function roundTrip(base: string, sid: string): Promise<number> {
  return printOne({ base, headers }, sid)
}

/** Follows an execution's events through `base` (resuming after instances go away) until its done; resolves when it came. */
async function followToDone(base: () => string, sid: string, eid: string): Promise<void> {
  for (;;) {
    const res = await fetch(`${base()}/v1/sessions/${sid}/executions/${eid}/events`, { headers: { ...headers, accept: 'text/event-stream' } }).catch(() => null)
    if (res?.status === 204) return
    if (res?.status === 200 && (await until(res, 'done').catch(() => false))) return
  }
}

/** Time from `t0` until code submitted through `base` is accepted (the SSE head), retrying 503s. */
async function acceptedAfter(t0: number, base: string, sid: string): Promise<number> {
  for (;;) {
    const res = await submit(base, sid, 'print(2)').catch(() => null)
    if (res?.status === 200) {
      const ms = performance.now() - t0
      await until(res, 'done')
      return ms
    }
    await res?.body?.cancel()
  }
}

async function main(): Promise<void> {
  for (let i = 0; i < 3; i++) servers.push(await startServer())
  const [a, b] = servers as [Server, Server]
  const sid = await createSession(a.url) // held by a
  for (let i = 0; i < 20; i++) await roundTrip(i % 2 ? a.url : b.url, sid) // warm-up
  // Two orders, same run: one request to each in turn (each instance idles while the other works,
  // as behind a round-robin balancer with one client), and blocks of BLOCK requests to each (an
  // instance serving a steady stream), the blocks alternating so that drift falls on both alike.
  for (const block of [1, BLOCK]) {
    const holder: number[] = []
    const other: number[] = []
    for (let i = 0; i < ROUNDS; i += block) {
      for (let j = 0; j < block; j++) holder.push(await roundTrip(a.url, sid))
      for (let j = 0; j < block; j++) other.push(await roundTrip(b.url, sid))
    }
    const order = block === 1 ? 'alternating' : `blocks of ${block}`
    console.log(line(`print(1) HTTP+SSE via the holder (${order})`, holder))
    console.log(line(`print(1) HTTP+SSE via another instance (${order})`, other))
    const h = summarize(holder)
    const o = summarize(other)
    console.log(`non-holder overhead, ${order}: p50 +${(o.median - h.median).toFixed(3)} ms, p99 +${(o.p99 - h.p99).toFixed(3)} ms (target: p50 <= +1 ms)`)
  }

  const killIdle: number[] = []
  const killRunning: number[] = []
  const term: number[] = []
  const termDone: number[] = []
  console.log(
    `failover with LEASE_TTL_MS=${TIMING.LEASE_TTL_MS} REAPER_INTERVAL_MS=${TIMING.REAPER_INTERVAL_MS} INSTANCE_HEARTBEAT_MS=${TIMING.INSTANCE_HEARTBEAT_MS}`,
  )
  for (let round = 0; round < FAILOVERS; round++) {
    // servers[0] holds an idle session and one running code; it is SIGKILLed; the others serve.
    const victim = servers[0]!
    const idle = await createSession(victim.url)
    const busy = await createSession(victim.url)
    const running = await submit(victim.url, busy, 'import time\nprint("start", flush=True)\ntime.sleep(0.5)\nprint("end")')
    await until(running, 'stdout')
    const eid = running.headers.get('location')!.split('/').pop()!
    const t0 = performance.now()
    await stop(victim, 'SIGKILL')
    const survivors = servers.slice(1)
    await Promise.all([
      acceptedAfter(t0, survivors[0]!.url, idle).then((ms) => killIdle.push(ms)),
      followToDone(() => survivors[1]!.url, busy, eid).then(() => killRunning.push(performance.now() - t0)),
    ])
    // SIGTERM: servers[1] holds a session running code; a survivor must accept code for it.
    const leaving = servers[1]!
    const handed = await createSession(leaving.url)
    const long = await submit(leaving.url, handed, 'import time\nprint("start", flush=True)\ntime.sleep(0.5)\nprint("end")')
    await until(long, 'stdout')
    const eid2 = long.headers.get('location')!.split('/').pop()!
    const t1 = performance.now()
    const left = stop(leaving, 'SIGTERM')
    const [accepted] = await Promise.all([acceptedAfter(t1, servers[2]!.url, handed), followToDone(() => servers[2]!.url, handed, eid2)])
    term.push(accepted)
    termDone.push(performance.now() - t1)
    await left
    for (const s of [idle, busy, handed]) await fetch(`${servers[2]!.url}/v1/sessions/${s}`, { method: 'DELETE', headers })
    // Two fresh instances replace the two stopped ones.
    servers.splice(0, 2, await startServer(), await startServer())
  }
  console.log(line('SIGKILL → first execution of an idle session', killIdle))
  console.log(line('SIGKILL → done of a running execution (0.5 s)', killRunning))
  console.log(line('SIGTERM → a survivor accepts code', term))
  console.log(line('SIGTERM → done of a running execution (0.5 s)', termDone))
}

main()
  .catch((err: unknown) => {
    console.error(err)
    process.exitCode = 1
  })
  .finally(async () => {
    await Promise.all(servers.map((s) => stop(s, 'SIGKILL')))
    await removeDeployment(deployment, prefix, redisUrl)
  })
