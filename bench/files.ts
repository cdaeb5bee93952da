// Workspace files: a 20 MB upload and download through the API (target: >= 50 MB/s each, the API
// process's RSS growing < 30 MB meanwhile) and small-file latency, beside the two transports
// measured alone in the same run: `docker exec` of the file program (the one used) and the REPL
// channel's base64 file_put/file_get frames (the alternative), idle and while code keeps the REPL busy.
// Run: npm run bench   (BENCH_FILE_ROUNDS, BENCH_SMALL_ROUNDS)
import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { fileURLToPath } from 'node:url'
import Docker from 'dockerode'
import { pino } from 'pino'
import { ReplClient } from '../src/repl/repl-client.js'
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
    const repl = await replChannel(cid, data)

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
    for (const [name, r] of Object.entries(repl)) console.log(line(name, r))
  } finally {
    child.kill('SIGTERM')
    await new Promise((r) => child.once('exit', r))
    await cleanUp()
  }
}

async function* chunks(data: Buffer, size: number): AsyncIterable<Buffer> {
  for (let o = 0; o < data.length; o += size) yield data.subarray(o, o + size)
}

/** The REPL channel (base64 frames over the attach stream), on a REPL of its own in the same container image. */
async function replChannel(cid: string, data: Buffer): Promise<Record<string, number[]>> {
  const info = await docker.getContainer(cid).inspect()
  const c = await docker.createContainer({
    Image: info.Config.Image,
    User: '1000:1000',
    Env: info.Config.Env,
    WorkingDir: '/workspace',
    OpenStdin: true,
    AttachStdin: true,
    AttachStdout: true,
    AttachStderr: true,
    Labels: { [LABEL.deployment]: env.REPLCAST_DEPLOYMENT },
    HostConfig: { ...info.HostConfig, AutoRemove: false },
  })
  const sock = (await c.attach({ stream: true, stdin: true, stdout: true, stderr: true, hijack: true })) as unknown as NodeJS.ReadWriteStream & {
    destroy(): void
  }
  await c.start()
  const { DockerDemuxer } = await import('../src/sandbox/demux.js')
  let onData: (b: Buffer) => void = () => {}
  const demux = new DockerDemuxer(
    (b) => onData(b),
    () => undefined,
  )
  sock.on('data', (b: Buffer) => demux.push(b))
  const client = new ReplClient(
    { write: (s) => void sock.write(s), onData: (cb) => (onData = cb), onClose: () => undefined, close: () => sock.destroy() },
    pino({ level: 'silent' }),
    { readyTimeoutMs: 30_000 },
  )
  await client.ready
  const CHUNK = 4 * 1024 * 1024
  const put = async () => {
    for (let o = 0; o < data.length; o += CHUNK)
      await client.request('file_put', { path: 'r.bin', offset: o, data: data.subarray(o, o + CHUNK).toString('base64') }, 120_000)
  }
  const get = async () => {
    for (let o = 0, eof = false; !eof;) {
      const r = await client.request('file_get', { path: 'r.bin', offset: o, length: CHUNK }, 120_000)
      o += Buffer.from(String(r.data), 'base64').length
      eof = r.eof === true
    }
  }
  const small = async () => void (await client.request('file_put', { path: 's.txt', offset: 0, data: 'aGVsbG8=' }, 10_000))
  const out: Record<string, number[]> = {}
  const idleUp = (await timed(ROUNDS, put)).ms
  const idleDown = (await timed(ROUNDS, get)).ms
  out[`REPL channel put 20 MB (${rate(idleUp)})`] = idleUp
  out[`REPL channel get 20 MB (${rate(idleDown)})`] = idleDown
  out['REPL channel put 5 bytes'] = (await timed(SMALL, small)).ms
  // The same while the REPL's main thread runs a Python loop (the control thread then shares the GIL).
  const busyEnded = new Promise<void>((ended) => {
    client.execute('busy', 'while True:\n    pass', (f) => {
      if (f.type === 'done') ended()
    })
  })
  const busyUp = (await timed(ROUNDS, put)).ms
  out[`REPL channel put 20 MB, code running (${rate(busyUp)})`] = busyUp
  out['REPL channel put 5 bytes, code running'] = (await timed(SMALL, small)).ms
  // Code that holds the GIL inside C (a regular expression that backtracks for ever): the channel's thread never runs.
  // Its `status` frame is not awaited: the REPL holds it for the first output, and this code has none.
  client.interrupt()
  await busyEnded
  client.execute('regex', 'import re\nre.match(r"(a+)+$", "a" * 40 + "b")', () => undefined)
  await new Promise((r) => setTimeout(r, 200)) // into the match itself (a bench, not a test: no event marks it)
  const t0 = performance.now()
  const answered = await client.request('file_put', { path: 's.txt', offset: 0, data: 'aGVsbG8=' }, 5_000).then(
    () => true,
    () => false,
  )
  console.log(`REPL channel put 5 bytes while code holds the GIL in C: ${answered ? `${(performance.now() - t0).toFixed(1)} ms` : 'no answer within 5 s'}`)
  client.close()
  await c.remove({ force: true })
  return out
}

async function cleanUp(): Promise<void> {
  await removeDeployment(env.REPLCAST_DEPLOYMENT, env.REPLCAST_KEY_PREFIX, process.env.REDIS_URL ?? 'redis://127.0.0.1:6379')
}

await main()
