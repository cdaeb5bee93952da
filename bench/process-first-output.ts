// Issue 33, background processes: the time from POST .../processes (`echo first`) to its first stdout
// line at a client that then opens GET .../output, beside the same run's baseline, a bash execution
// `echo first` from its POST to its first stdout event (one request, streamed). Rounds alternate the
// two in one session, so both meet the same conditions.
// Run: node --import=@tapjs/typescript/import bench/process-first-output.ts   (BENCH_PROCESS_ROUNDS, default 200)
import http from 'node:http'
import { call, createSession, deleteSession, execute, type Target } from './client.js'
import { startServer } from './server.js'
import { line, summarize } from './stats.js'

const ROUNDS = Number(process.env.BENCH_PROCESS_ROUNDS ?? 200)
const WARMUP = 10
const agent = new http.Agent({ keepAlive: true })

/** GET .../output: ms from `t0` to the first stdout event (the rest of the stream is not read). */
function firstStdout(t: Target, path: string, t0: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${t.base}${path}`, { agent, headers: { authorization: t.headers.authorization!, accept: 'text/event-stream' } }, (res) => {
      if (res.statusCode !== 200) return reject(new Error(`output answered ${res.statusCode}`))
      let buf = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => {
        buf += chunk
        if (/^event: stdout$/m.test(buf)) {
          const at = performance.now()
          res.destroy()
          resolve(at - t0)
        }
      })
      res.on('end', () => reject(new Error('the output ended without a stdout event')))
    })
    req.on('error', reject)
    req.end()
  })
}

async function processRound(t: Target, sid: string): Promise<number> {
  const t0 = performance.now()
  const started = await call(t, 'POST', `/v1/sessions/${sid}/processes`, { command: 'echo first' })
  if (started.status !== 201) throw new Error(`process start answered ${started.status}: ${JSON.stringify(started.body)}`)
  return firstStdout(t, `/v1/sessions/${sid}/processes/${(started.body as { id: string }).id}/output`, t0)
}

async function bashRound(t: Target, sid: string): Promise<number> {
  let first = NaN
  const run = await execute(t, sid, 'echo first', { language: 'bash', onEvent: (e) => (e.event === 'stdout' ? ((first = e.at), true) : false) })
  if (Number.isNaN(first)) throw new Error('the bash execution gave no stdout event')
  return first - run.t0
}

const server = await startServer()
try {
  const sid = await createSession(server)
  const proc: number[] = []
  const bash: number[] = []
  for (let i = 0; i < ROUNDS + WARMUP; i++) {
    const p = await processRound(server, sid)
    const b = await bashRound(server, sid)
    if (i >= WARMUP) {
      proc.push(p)
      bash.push(b)
    }
  }
  console.log(line('process: POST .../processes → first stdout', proc))
  console.log(line('baseline: bash execution POST → first stdout', bash))
  const ratio = summarize(proc).median / summarize(bash).median
  console.log(`median ratio process / bash execution: ${ratio.toFixed(2)}`)
  await deleteSession(server, sid)
} finally {
  await server.close()
}
