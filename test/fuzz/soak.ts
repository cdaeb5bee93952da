// The contract soak (`npm run soak`): the fuzz test's requests, 20,000 by default, with a random seed it
// prints, against the real server in a child process (so its RSS is its own and a crash is seen).
// Replay: npm run soak -- --seed N [--requests N] [--only i,j,...] [--concurrency N]
import { spawn } from 'node:child_process'
import { createWriteStream, readFileSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { randomBytes } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import { Redis } from 'ioredis'
import { API_KEY, OTHER_KEY, containersOf, removeDeployment, testEnv } from '../helpers/app.js'
import { startFakeLlm } from '../helpers/fake-llm.js'
import { waitFor } from '../helpers/wait.js'
import { OpenApiModel } from './openapi-model.js'
import { checkGuarded, cleanUp, prepareWorld, REQUIRED_KINDS, runFuzz } from './run.js'
import { FUZZ_ENV, fakeModelAnswer } from './setup.js'

const args = new Map<string, string>()
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i]!.replace(/^--/, ''), process.argv[i + 1] ?? '')
const seed = args.has('seed') ? Number(args.get('seed')) : randomBytes(4).readUInt32LE() % 1e9
const count = Number(args.get('requests') ?? 20_000)
const concurrency = Number(args.get('concurrency') ?? 6)
const only = args.has('only') ? new Set(args.get('only')!.split(',').map(Number)) : undefined
const root = fileURLToPath(new URL('../../', import.meta.url))

const rssMb = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024
const load = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port
      s.close(() => resolve(port))
    })
  })
}

console.log(`soak: seed ${seed}, ${count} requests, concurrency ${concurrency} (replay: npm run soak -- --seed ${seed})`)
const llm = await startFakeLlm()
llm.fallback = fakeModelAnswer
const tag = randomBytes(4).toString('hex')
const port = await freePort()
const env = testEnv({
  ...FUZZ_ENV,
  REPLCAST_KEY_PREFIX: `replcast-soak-${tag}:`,
  REPLCAST_DEPLOYMENT: `soak-${tag}`,
  REPLCAST_INSTANCE_ID: `soak-${tag}`,
  PORT: String(port),
  LOG_LEVEL: 'warn',
  OPENAI_BASE_URL: llm.baseURL,
  OPENAI_API_KEY: 'fake-key',
})
const logPath = `${root}.replcast/soak-${seed}.server.log`
const server = spawn(process.execPath, [...process.execArgv, `${root}src/server.ts`], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
const log = createWriteStream(logPath)
server.stdout.pipe(log)
server.stderr.pipe(log)
let exited = null as string | null
server.on('exit', (code, signal) => {
  exited = `exit ${code ?? signal}`
})
const base = `http://127.0.0.1:${port}`
if (!(await waitFor(async () => (await fetch(`${base}/healthz`).catch(() => null))?.ok === true, 60_000, 100)))
  throw new Error(`the server did not start (${logPath})`)

const model = OpenApiModel.load()
const world = await prepareWorld(base, { alpha: API_KEY, beta: OTHER_KEY }, Number(FUZZ_ENV.BODY_LIMIT_BYTES))
const rssBefore = rssMb(server.pid!)
console.log(`API RSS before: ${rssBefore.toFixed(0)} MB; load ${load()}`)
const report = await runFuzz(model, world, {
  base,
  seed,
  count,
  concurrency,
  only,
  progress: (done, faults) => {
    if (done % 1000 === 0) console.log(`  ${done} requests, ${faults} faults, RSS ${rssMb(server.pid!).toFixed(0)} MB, load ${load()}`)
  },
})
const rssAfter = exited ? 0 : rssMb(server.pid!)
const guarded = exited ? [`the server died: ${exited}`] : await checkGuarded(base, world)
const deleted = exited ? 0 : await cleanUp(base, world, true)
const left = await waitFor(async () => (await containersOf(env.REPLCAST_DEPLOYMENT!)).length === 0, 30_000)

console.log(
  `requests: ${report.requests} in ${report.seconds.toFixed(1)} s (${(report.requests / report.seconds).toFixed(0)}/s); sessions created: ${report.sessionsCreated}`,
)
console.log(`statuses: ${JSON.stringify(Object.fromEntries(Object.entries(report.statuses).sort()))}`)
const missing = REQUIRED_KINDS.filter((k) => !report.kinds[k])
console.log(`kinds of request: ${Object.keys(report.kinds).length}${missing.length ? `; never sent: ${missing.join(', ')}` : ', every required kind sent'}`)
console.log(`API RSS: ${rssBefore.toFixed(0)} MB before, ${rssAfter.toFixed(0)} MB after; load ${load()}`)
console.log(`guarded sessions: ${guarded.length ? guarded.join('; ') : 'variables intact'}; deleted ${deleted} sessions; containers left: ${left ? 0 : 'some'}`)
const faultsPath = `${root}.replcast/soak-${seed}.faults.json`
writeFileSync(faultsPath, JSON.stringify(report.faults, null, 2))
console.log(`faults: ${report.faults.length}${report.faults.length ? ` (all in ${faultsPath})` : ''}`)
for (const f of report.faults.slice(0, 30)) console.log(`  #${f.i} [${f.why}] ${f.reasons.join('; ')}\n    ${f.request}\n    → ${f.answer}`)

server.kill('SIGTERM')
await waitFor(() => exited !== null, 15_000)
// Errors the server logged (5xx, unhandled rejections): each deserves a look even when no answer showed it.
const errors = readFileSync(logPath, 'utf8')
  .split('\n')
  .filter((l) => /"level":(50|60)/.test(l))
console.log(`server log: ${errors.length} error lines${errors.length ? ` (${logPath}), first: ${errors[0]!.slice(0, 400)}` : ''}`)
await removeDeployment(env.REPLCAST_DEPLOYMENT!)
const redis = new Redis(env.REDIS_URL!)
const keys = await redis.keys(`${env.REPLCAST_KEY_PREFIX}*`)
if (keys.length) await redis.del(...keys)
redis.disconnect()
await llm.close()
process.exit(report.faults.length || guarded.length || !left ? 1 : 0)
