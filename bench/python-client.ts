// print(1) round trips through the Python client (clients/python) beside the TypeScript client and
// raw httpx, in the same run, against one session of a server running as a process of its own. Each
// Python way runs in a process of its own (bench/python-client.py); the TypeScript client runs here.
// Timed from the call to the execution's `done`, after a warm-up.
// Run: npm run bench   (BENCH_PY_ROUNDS: rounds per way, default 300)
import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { ReplcastClient } from '../clients/typescript/src/index.ts'
import { startServer } from './server.js'
import { line } from './stats.js'

const ROUNDS = Number(process.env.BENCH_PY_ROUNDS ?? 300)
/** The rounds are taken in blocks, each way in turn within a block, so that the machine's drift is shared. */
const BLOCKS = 5
const WARMUP = 10
const ROOT = fileURLToPath(new URL('../', import.meta.url))
/** Debian's python3, whose python3-httpx the client runs on (a python3 earlier on PATH may lack it). */
const PYTHON = process.env.BENCH_PYTHON ?? '/usr/bin/python3'
const run = promisify(execFile)

async function python(way: string, url: string, key: string, sid: string, rounds: number): Promise<number[]> {
  const { stdout } = await run(PYTHON, [`${ROOT}bench/python-client.py`, way, url, key, sid, String(rounds), String(WARMUP)], {
    env: { ...process.env, PYTHONPATH: `${ROOT}clients/python/src`, PYTHONDONTWRITEBYTECODE: '1' },
    maxBuffer: 16 * 1024 * 1024,
  })
  return (JSON.parse(stdout) as { samples_ms: number[] }).samples_ms
}

async function timed(fn: () => Promise<void>, rounds: number): Promise<number[]> {
  const out: number[] = []
  for (let i = 0; i < rounds + WARMUP; i++) {
    const t0 = performance.now()
    await fn()
    if (i >= WARMUP) out.push(performance.now() - t0)
  }
  return out
}

async function main(): Promise<void> {
  const server = await startServer()
  try {
    const key = server.headers.authorization!.slice('Bearer '.length)
    const ts = new ReplcastClient({ url: server.base, apiKey: key })
    const sid = (await ts.createSession()).id
    const ways: [string, (rounds: number) => Promise<number[]>][] = [
      ['Python client: session.run', (n) => python('replcast-run', server.base, key, sid, n)],
      ['Python client: session.stream', (n) => python('replcast-stream', server.base, key, sid, n)],
      [
        'TypeScript client: execute',
        (n) =>
          timed(async () => {
            const ex = await ts.execute(sid, 'print(1)')
            if (ex.status !== 'ok') throw new Error(`print(1) ended ${ex.status}`)
          }, n),
      ],
      [
        'TypeScript client: stream',
        (n) =>
          timed(async () => {
            for await (const e of await ts.stream(sid, 'print(1)')) void e
          }, n),
      ],
      ['raw httpx: SSE until done', (n) => python('httpx-sse', server.base, key, sid, n)],
      ['raw httpx: JSON reply', (n) => python('httpx-json', server.base, key, sid, n)],
    ]
    const samples = new Map<string, number[]>(ways.map(([name]) => [name, []]))
    for (let b = 0; b < BLOCKS; b++) {
      // Each block starts with another way, so that none is always first after the previous block's last.
      for (let i = 0; i < ways.length; i++) {
        const [name, measure] = ways[(i + b) % ways.length]!
        samples.get(name)!.push(...(await measure(Math.ceil(ROUNDS / BLOCKS))))
      }
    }
    console.log(`print(1) round trip by client (${ROUNDS} rounds each in ${BLOCKS} blocks taken in turn, one session, server in its own process)`)
    for (const [name, ms] of samples) console.log(line(name, ms))
    console.log('  (raw httpx, JSON: httpx writes the body after the headers; without TCP_NODELAY, as here, the body waits for a delayed ACK.')
    console.log('   The replcast package sets TCP_NODELAY; raw httpx until done closes its connection each time, which dodges the wait.)')
    await ts.deleteSession(sid)
  } finally {
    await server.close()
  }
}

await main()
