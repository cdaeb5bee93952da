// Workspace files: a 20 MB upload and download through the API (target: >= 50 MB/s each, the API
// process's RSS growing < 30 MB meanwhile) and small-file latency, beside the transport measured
// alone in the same run: `docker exec` of the file program. Its old baseline, the REPL channel's
// base64 file_put/file_get frames, went with those frames (issue 30): its figures stay in
// docs/performance.md.
// Run: npm run bench   (BENCH_FILE_ROUNDS, BENCH_SMALL_ROUNDS)
import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { fileURLToPath } from 'node:url'
import Docker from 'dockerode'
import { LABEL } from '../src/sandbox/labels.js'
import { WorkspaceFiles } from '../src/sandbox/workspace-files.js'
import { removeDeployment } from './harness.js'
import { line, summarize } from './stats.js'

const ROUNDS = Number(process.env.BENCH_FILE_ROUNDS ?? 5)
const SMALL = Number(process.env.BENCH_SMALL_ROUNDS ?? 30)
const SIZE = 20 * 1024 * 1024
const MB = 1e6
const tag = randomBytes(4).toString('hex')
const key = `bench-key-${tag}`
const env = {
  REPLCAST_API_KEYS: `bench=${key}`,
  REPLCAST_KEY_PREFIX: `replcast-bench-${tag}:`,
  REPLCAST_DEPLOYMENT: `bench-${tag}`,
  REPLCAST_INSTANCE_ID: `bench-files-${tag}`,
  LOG_LEVEL: 'warn',
  SANDBOX_POOL_SIZE: '0',
  SANDBOX_RUNTIME: 'runc',
  TENANT_RATE_PER_MIN: '1000000',
}
const auth = { authorization: `Bearer ${key}` }
const docker = new Docker()

const rss = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) * 1024
const rate = (ms: number[]) => `${(SIZE / MB / (summarize(ms).median / 1000)).toFixed(0)} MB/s`

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const a = s.address()
      s.close(() => resolve(typeof a === 'object' && a ? a.port : 0))
    })
  })
}

async function startServer(): Promise<{ base: string; child: ChildProcess }> {
  const port = await freePort()
  const server = fileURLToPath(new URL('../src/server.ts', import.meta.url))
  const child = spawn(process.execPath, [...process.execArgv, server], {
    env: { ...process.env, ...env, PORT: String(port) },
    stdio: ['ignore', 'inherit', 'inherit'],
  })
  const base = `http://127.0.0.1:${port}`
  for (let i = 0; i < 600; i++) {
    if (
      await fetch(`${base}/healthz`).then(
        (r) => r.ok,
        () => false,
      )
    )
      return { base, child }
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error('the server did not start')
}

/** Times `fn` `n` times after one warm-up, sampling the server's RSS meanwhile; returns ms samples and the RSS growth. */
async function timed(n: number, fn: () => Promise<void>, pid?: number): Promise<{ ms: number[]; growth: number }> {
  if (process.env.BENCH_DEBUG) console.error('timed', new Error().stack?.split('\n')[2])
  await fn()
  const base = pid ? rss(pid) : 0
  let peak = base
  const sampler = pid ? setInterval(() => (peak = Math.max(peak, rss(pid))), 5) : undefined
  const ms: number[] = []
  for (let i = 0; i < n; i++) {
    const t0 = performance.now()
    await fn()
    ms.push(performance.now() - t0)
  }
  clearInterval(sampler)
  return { ms, growth: peak - base }
}

async function main(): Promise<void> {
  const { base, child } = await startServer()
  const data = randomBytes(SIZE)
  try {
    const created = await fetch(`${base}/v1/sessions`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ limits: { memory_mb: 512, workspace_mb: 256 } }),
    })
    const sid = ((await created.json()) as { id: string }).id
    const url = (p: string) => `${base}/v1/sessions/${sid}/files/${p}`
    const pid = child.pid!
    const rssAtStart = rss(pid)
    const up = await timed(
      ROUNDS,
      async () => {
        const r = await fetch(url('big.bin'), { method: 'PUT', headers: { ...auth, 'content-type': 'application/octet-stream' }, body: data })
        if (r.status > 201) throw new Error(`PUT ${r.status}`)
        await r.arrayBuffer()
      },
      pid,
    )
    const down = await timed(
      ROUNDS,
      async () => {
        const r = await fetch(url('big.bin'), { headers: auth })
        let n = 0
        for await (const c of r.body as unknown as AsyncIterable<Uint8Array>) n += c.length
        if (n !== SIZE) throw new Error(`GET gave ${n} bytes`)
      },
      pid,
    )
    const smallPut = await timed(SMALL, async () => {
      const r = await fetch(url('small.txt'), { method: 'PUT', headers: { ...auth, 'content-type': 'application/octet-stream' }, body: 'hello' })
      await r.arrayBuffer()
    })
    const smallGet = await timed(SMALL, async () => void (await (await fetch(url('small.txt'), { headers: auth })).arrayBuffer()))

    // The transports alone, on the same session's container.
    const list = await docker.listContainers({ filters: { label: [`${LABEL.session}=${sid}`] } })
    const cid = list[0]!.Id
    const ws = new WorkspaceFiles({ docker, user: '1000:1000', timeoutMs: 30_000, stallMs: 30_000 })
    const execUp = await timed(ROUNDS, async () => void (await ws.put(cid, 'x.bin', chunks(data, 64 * 1024), { maxBytes: SIZE * 2 })))
    const execDown = await timed(ROUNDS, async () => {
      const { body } = await ws.get(cid, 'x.bin', { maxBytes: SIZE * 2 })
      for await (const _ of body) void _
    })
    const execSmall = await timed(SMALL, async () => void (await ws.put(cid, 's.txt', [Buffer.from('hello')], { maxBytes: 100 })))

    console.log(`workspace files benchmark (${ROUNDS} rounds of 20 MB after a warm-up; ${SMALL} small-file rounds)`)
    console.log(line(`API PUT 20 MB (${rate(up.ms)})`, up.ms))
    console.log(line(`API GET 20 MB (${rate(down.ms)})`, down.ms))
    console.log(`API process RSS growth during the 20 MB transfers: PUT ${(up.growth / MB).toFixed(1)} MB, GET ${(down.growth / MB).toFixed(1)} MB`)
    console.log(`API process RSS: ${(rssAtStart / MB).toFixed(0)} MB before the transfers, ${(rss(pid) / MB).toFixed(0)} MB after them`)
    console.log(line('API PUT 5 bytes', smallPut.ms))
    console.log(line('API GET 5 bytes', smallGet.ms))
    console.log(line(`exec transport put 20 MB (${rate(execUp.ms)})`, execUp.ms))
    console.log(line(`exec transport get 20 MB (${rate(execDown.ms)})`, execDown.ms))
    console.log(line('exec transport put 5 bytes', execSmall.ms))
  } finally {
    child.kill('SIGTERM')
    await new Promise((r) => child.once('exit', r))
    await cleanUp()
  }
}

async function* chunks(data: Buffer, size: number): AsyncIterable<Buffer> {
  for (let o = 0; o < data.length; o += size) yield data.subarray(o, o + size)
}

async function cleanUp(): Promise<void> {
  await removeDeployment(env.REPLCAST_DEPLOYMENT, env.REPLCAST_KEY_PREFIX, process.env.REDIS_URL ?? 'redis://127.0.0.1:6379')
}

await main()
