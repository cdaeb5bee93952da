// Fair share under floods: a neighbour tenant's print(1) loop, p50 and p99, first with nothing else
// running, then while other sessions flood the API with output (several printing ~100 MB each as fast
// as they can, one forging stream frames whose text must be escaped anew, one writing junk lines on
// its channel, one sending llm_request frames while it stops reading): a flooder should slow itself,
// not its neighbours. Target: the neighbour's p99 under the floods within 3x its idle p99.
import { randomBytes } from 'node:crypto'
import { rmSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import { tmpdir } from 'node:os'
import { CHANNEL_PRELUDE } from '../test/helpers/channel-attack.js'
import { createSession, deleteSession, printOne, type Target } from './client.js'
import type { Report } from './report.js'
import { cpuMs, machineCpu, redisCpuMs, startServer } from './server.js'
import { summarize } from './stats.js'

const FLOODERS = Number(process.env.BENCH_FAIR_FLOODERS ?? 4)
const FLOOD_MB = Number(process.env.BENCH_FAIR_FLOOD_MB ?? 100)
const IDLE_ROUNDS = 300
const WARMUP = 50
const MB = 1e6
/** The flooders' sandboxes, as the hostile tests make them. */
const LIMITS = { memory_mb: 256, pids: 64, cpus: 0.5 }

/** ~FLOOD_MB of 1,000-byte lines, printed as fast as Python can. */
const PRINTS = `line = "x" * 999\nfor _ in range(${FLOOD_MB * 1000}):\n    print(line)`
/** Stream frames written straight onto the channel, their text non-ASCII: the host escapes each anew. */
const FORGED =
  CHANNEL_PRELUDE +
  [
    'frame = (json.dumps({"v": 1, "type": "stream", "exec_id": _me, "name": "stdout", "text": "\\u00e9" * 10000}) + "\\n").encode()',
    '_ch.flush()',
    `for _ in range(${Math.round((FLOOD_MB * MB) / 60_000)}):`,
    '    data = frame',
    '    while data:',
    '        data = data[os.write(_ch.out_fd, data):]',
  ].join('\n')
/** Junk lines on the channel: the host ends the session after SANDBOX_PROTOCOL_VIOLATIONS of them. */
const JUNK = CHANNEL_PRELUDE + 'junk = b"x\\n" * 5000\nfor i in range(40):\n    j = junk\n    while j:\n        j = j[os.write(_ch.out_fd, j):]\ntime.sleep(30)'
/** llm_request frames with 100 kB ids (echoed by the host's answers) while the sandbox stops reading them. */
const LLM_FLOOD =
  CHANNEL_PRELUDE +
  [
    'r, w = os.pipe()',
    'os.dup2(r, _ch.in_fd)',
    'line = (json.dumps({"v": 1, "type": "llm_request", "id": "x" * 100000, "exec_id": "not-running", "prompts": ["hi"]}) + "\\n").encode()',
    'for i in range(3000):',
    '    data = line',
    '    while data:',
    '        data = data[os.write(_ch.out_fd, data):]',
    'time.sleep(30)',
  ].join('\n')

/** An execution over SSE whose body is only counted (the client's parsing must not cost the neighbour's loop): bytes read. */
function flood(t: Target, sid: string, code: string, timeout_s = 120): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${t.base}/v1/sessions/${sid}/executions`, { method: 'POST', headers: { ...t.headers, accept: 'text/event-stream' } }, (res) => {
      let n = 0
      res.on('data', (b: Buffer) => (n += b.length))
      res.on('end', () => resolve(n))
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end(JSON.stringify({ code, timeout_s }))
  })
}

/** print(1) back to back in the neighbour's session until `until` settles (and at least `min` rounds): the round trips in ms. */
async function loop(t: Target, sid: string, until: Promise<unknown> | null, min: number): Promise<number[]> {
  let over = until === null
  void until?.finally(() => (over = true))
  const out: number[] = []
  while (!over || out.length < min) out.push(await printOne(t, sid))
  return out
}

export async function fairShare(report: Report): Promise<void> {
  const G = 'fair-share'
  const neighbourKey = `bench-neighbour-${randomBytes(6).toString('hex')}`
  const keysFile = `${tmpdir()}/replcast-bench-keys-${randomBytes(4).toString('hex')}`
  writeFileSync(keysFile, `neighbour=${neighbourKey}\n`)
  const server = await startServer({ REPLCAST_API_KEYS_FILE: keysFile, MAX_OUTPUT_BYTES: String(2 * FLOOD_MB * MB) })
  try {
    const t: Target = server
    const n: Target = { base: server.base, headers: { ...server.headers, authorization: `Bearer ${neighbourKey}` } }
    const neighbour = await createSession(n)
    const body = { limits: { ...LIMITS, output_bytes: Math.round(FLOOD_MB * MB * 1.1) } }
    const flooders = await Promise.all(Array.from({ length: FLOODERS }, () => createSession(t, body)))
    const [forger, junker, asker] = await Promise.all([createSession(t, body), createSession(t, { limits: LIMITS }), createSession(t, { limits: LIMITS })])
    for (const s of [...flooders, forger, junker, asker]) await printOne(t, s)
    for (let i = 0; i < WARMUP; i++) await printOne(n, neighbour)

    const idle = await loop(n, neighbour, null, IDLE_ROUNDS)
    const api0 = cpuMs(server.pid)
    const redis0 = await redisCpuMs(server.redis)
    const machine0 = machineCpu()
    const t0 = performance.now()
    const floods = Promise.all([
      ...flooders.map((s) => flood(t, s, PRINTS)),
      flood(t, forger, FORGED),
      flood(t, junker, JUNK, 20),
      flood(t, asker, LLM_FLOOD, 20),
    ])
    const busy = await loop(n, neighbour, floods, 20)
    const read = await floods
    const seconds = (performance.now() - t0) / 1000
    const apiMs = cpuMs(server.pid) - api0
    const redisMs = (await redisCpuMs(server.redis)) - redis0
    const m = machineCpu()
    await Promise.all([...flooders, forger, junker, asker, neighbour].map((s) => deleteSession(s === neighbour ? n : t, s)))

    const a = summarize(idle)
    const b = summarize(busy)
    const pct = (ms: number) => `${((100 * ms) / (seconds * 1000)).toFixed(0)} %`
    const flooded = read.reduce((x, y) => x + y, 0)
    console.log(
      `  (idle: ${a.n} print(1), p50 ${a.median.toFixed(1)} ms, p99 ${a.p99.toFixed(1)} ms, max ${a.max.toFixed(1)} ms; ` +
        `flooded for ${seconds.toFixed(1)} s: ${b.n} print(1), p50 ${b.median.toFixed(1)} ms, p99 ${b.p99.toFixed(1)} ms, max ${b.max.toFixed(1)} ms; ` +
        `the floods' clients read ${(flooded / MB).toFixed(0)} MB of SSE (${(flooded / MB / seconds).toFixed(0)} MB/s); CPU of one core: ` +
        `API ${pct(apiMs)}, Redis ${pct(redisMs)}, dockerd ${pct(m.dockerdMs - machine0.dockerdMs)}, containerd ${pct(m.containerdMs - machine0.containerdMs)}, ` +
        `sandboxes ${pct(m.sandboxMs - machine0.sandboxMs)}, the machine ${pct(m.busyMs - machine0.busyMs)})`,
    )
    report.add(G, "neighbour's print(1) p50 during floods", b.median, 'ms', {
      baseline: { name: 'idle', value: a.median },
      ratio: 'ours/baseline',
      ratioName: 'flooded / idle',
    })
    report.add(G, "neighbour's print(1) p99 during floods", b.p99, 'ms', {
      baseline: { name: 'idle', value: a.p99 },
      ratio: 'ours/baseline',
      ratioName: 'flooded / idle',
      target: '<= 3x idle p99',
      met: b.p99 <= 3 * a.p99,
      note: `${FLOODERS} sessions printing ${FLOOD_MB} MB each, one forging ${FLOOD_MB} MB of frames, junk lines, an llm_request flood`,
    })
    // The floods slow themselves instead: what their clients got, for comparison between runs.
    report.add(G, "the flooding sessions' output read over SSE", flooded / MB / seconds, 'MB/s', {
      note: `${(flooded / MB).toFixed(0)} MB in ${seconds.toFixed(1)} s (the tenant's max_event_bytes cuts what Redis keeps)`,
    })
  } finally {
    rmSync(keysFile, { force: true })
    await server.close()
  }
}
