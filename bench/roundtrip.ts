// Round trip of print(1) through HTTP+SSE, next to the raw docker-attach echo round trip and
// the REPL protocol round trip measured in the same run; plus session-create latency.
// Run: npm run bench   (needs dockerd, Redis and the sandbox image: npm test sets them up)
import Docker from 'dockerode'
import { randomBytes } from 'node:crypto'
import { pino } from 'pino'
import { DockerDemuxer } from '../src/sandbox/demux.js'
import { DockerSandboxDriver } from '../src/sandbox/docker-driver.js'
import { ReplClient } from '../src/repl/repl-client.js'
import { LABEL } from '../src/sandbox/labels.js'
import { startBenchApp, type BenchApp } from './harness.js'
import { line, summarize } from './stats.js'

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 200)
const CREATES = Number(process.env.BENCH_CREATES ?? 20)
const tag = randomBytes(4).toString('hex')
const log = pino({ level: 'silent' })
const docker = new Docker()

async function attachEcho({ config }: BenchApp): Promise<number[]> {
  // The floor: a line written to a sandboxed `cat` over the attach socket and read back.
  const c = await docker.createContainer({
    Image: config.SANDBOX_IMAGE,
    Cmd: ['cat'],
    OpenStdin: true,
    StdinOnce: false,
    Tty: false,
    Labels: { [LABEL.deployment]: config.REPLCAST_DEPLOYMENT },
    HostConfig: { NetworkMode: 'none', ReadonlyRootfs: true, CapDrop: ['ALL'] },
  })
  const sock = (await c.attach({ stream: true, stdin: true, stdout: true, stderr: true, hijack: true })) as unknown as NodeJS.ReadWriteStream & {
    destroy(): void
  }
  await c.start()
  let waiter: (() => void) | null = null
  let buf = ''
  const demux = new DockerDemuxer(
    (b) => {
      buf += b.toString()
      if (buf.includes('\n')) {
        buf = ''
        waiter?.()
      }
    },
    () => undefined,
  )
  sock.on('data', (b: Buffer) => demux.push(b))
  const samples: number[] = []
  for (let i = 0; i < ROUNDS + 10; i++) {
    const t0 = performance.now()
    await new Promise<void>((r) => {
      waiter = r
      sock.write(`ping ${i}\n`)
    })
    if (i >= 10) samples.push(performance.now() - t0)
  }
  sock.destroy()
  await c.remove({ force: true })
  return samples
}

async function replRoundTrip({ config }: BenchApp): Promise<number[]> {
  // The REPL protocol alone: execute print(1) on the client, wait for done.
  const driver = new DockerSandboxDriver('', log)
  const h = await driver.create({
    sessionId: `ses_bench${tag}replxxxxxxx`.slice(0, 24),
    tenant: 'bench',
    instance: 'bench',
    deployment: config.REPLCAST_DEPLOYMENT,
    image: config.SANDBOX_IMAGE,
    runtime: 'runc',
    user: config.SANDBOX_USER,
    memoryMb: 512,
    cpus: 1,
    pids: 128,
    workspaceMb: 64,
    tmpMb: 64,
    nofile: 1024,
    maxStreamBytes: 1e6,
    maxImageBytes: 5e6,
    env: {},
  })
  const client = new ReplClient(h.transport, log, { readyTimeoutMs: 30000 })
  await client.ready
  const samples: number[] = []
  for (let i = 0; i < ROUNDS + 10; i++) {
    const t0 = performance.now()
    await new Promise<void>((r) =>
      client.execute(`x${i}`, 'print(1)', (f) => {
        if (f.type === 'done') r()
      }),
    )
    if (i >= 10) samples.push(performance.now() - t0)
  }
  client.close()
  await driver.remove(h.containerId)
  return samples
}

async function httpRoundTrip({ base, headers }: BenchApp, sid: string): Promise<number[]> {
  const samples: number[] = []
  for (let i = 0; i < ROUNDS + 10; i++) {
    const t0 = performance.now()
    const res = await fetch(`${base}/v1/sessions/${sid}/executions`, {
      method: 'POST',
      headers: { ...headers, accept: 'text/event-stream' },
      body: JSON.stringify({ code: 'print(1)' }),
    })
    const text = await res.text() // the stream ends after `done`
    if (!text.includes('event: done')) throw new Error('no done event')
    if (i >= 10) samples.push(performance.now() - t0)
  }
  return samples
}

async function main(): Promise<void> {
  const app = await startBenchApp()
  const { base, headers } = app
  try {
    const creates: number[] = []
    const ids: string[] = []
    for (let i = 0; i < CREATES; i++) {
      const t0 = performance.now()
      const r = await fetch(`${base}/v1/sessions`, { method: 'POST', headers, body: '{}' })
      creates.push(performance.now() - t0)
      ids.push(((await r.json()) as { id: string }).id)
    }
    const echo = await attachEcho(app)
    const repl = await replRoundTrip(app)
    const http = await httpRoundTrip(app, ids[0]!)
    console.log(`replcast round-trip benchmark (${ROUNDS} rounds after 10 warm-up; ${CREATES} session creates)`)
    console.log(line('docker attach echo (baseline)', echo))
    console.log(line('REPL protocol print(1) over attach', repl))
    console.log(line('HTTP POST + SSE print(1) until done', http))
    console.log(line('session create (POST /v1/sessions)', creates))
    const ratio = (a: number[], b: number[]) => (summarize(a).median / summarize(b).median).toFixed(1)
    console.log(
      `ratio median HTTP+SSE / attach echo = ${ratio(http, echo)}x; REPL / attach echo = ${ratio(repl, echo)}x; HTTP+SSE / REPL = ${ratio(http, repl)}x`,
    )
  } finally {
    await app.close()
  }
}

await main()
