// The contract under any input: 3,000 requests derived from openapi.yaml (valid, mutated, malformed)
// with a fixed seed, each answer judged by the document and src/errors.ts (test/fuzz/check.ts).
// FUZZ_SEED, FUZZ_REQUESTS and FUZZ_ONLY (request numbers, comma-separated) replay or widen a run;
// `npm run soak` runs 20,000 with a random seed.
import t from 'tap'
import { mkdirSync, writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { API_KEY, OTHER_KEY, containersOf, startApp } from '../helpers/app.js'
import { startFakeLlm } from '../helpers/fake-llm.js'
import { waitFor } from '../helpers/wait.js'
import { OpenApiModel } from './openapi-model.js'
import { checkGuarded, cleanUp, prepareWorld, REQUIRED_KINDS, runFuzz } from './run.js'
import { FUZZ_ENV, fakeModelAnswer } from './setup.js'

const SEED = Number(process.env.FUZZ_SEED ?? 15_2025)
const COUNT = Number(process.env.FUZZ_REQUESTS ?? 3000)
const ONLY = process.env.FUZZ_ONLY ? new Set(process.env.FUZZ_ONLY.split(',').map(Number)) : undefined

t.test(`${COUNT} requests derived from openapi.yaml (seed ${SEED}) all keep the documented contract`, async (t) => {
  const llm = await startFakeLlm()
  llm.fallback = fakeModelAnswer
  t.teardown(() => llm.close())
  const h = await startApp(t, { ...FUZZ_ENV, OPENAI_BASE_URL: llm.baseURL, OPENAI_API_KEY: 'fake-key' })
  const model = OpenApiModel.load()
  const world = await prepareWorld(h.url, { alpha: API_KEY, beta: OTHER_KEY }, Number(FUZZ_ENV.BODY_LIMIT_BYTES))
  const guarded = world.sessions.map((s) => s.id).sort()
  // The server runs in this process: a polluted prototype would show here.
  const prototypeBefore = Object.getOwnPropertyNames(Object.prototype).sort()

  const report = await runFuzz(model, world, { base: h.url, seed: SEED, count: COUNT, concurrency: 6, only: ONLY })
  t.comment(
    `${report.requests} requests in ${report.seconds.toFixed(1)} s, ${report.sessionsCreated} sessions created; statuses ${JSON.stringify(report.statuses)}`,
  )
  if (report.faults.length) {
    const dir = fileURLToPath(new URL('../../.replcast/', import.meta.url))
    mkdirSync(dir, { recursive: true })
    writeFileSync(`${dir}fuzz-${SEED}.faults.json`, JSON.stringify(report.faults, null, 2))
    t.comment(`all ${report.faults.length} faults: ${dir}fuzz-${SEED}.faults.json`)
  }
  for (const f of report.faults.slice(0, 20)) t.comment(`FAULT #${f.i} [${f.why}] ${f.reasons.join('; ')}\n  ${f.request}\n  → ${f.answer}`)
  t.same(
    report.faults.map((f) => `#${f.i} ${f.reasons[0]}`),
    [],
    `no request broke the contract (replay one with FUZZ_SEED=${SEED} FUZZ_ONLY=<number>)`,
  )
  t.ok(report.statuses['200'] && report.statuses['201'] && report.statuses['400'] && report.statuses['404'], 'valid and invalid requests both got through')
  if (!ONLY && COUNT >= 3000)
    t.same(
      REQUIRED_KINDS.filter((k) => !report.kinds[k]),
      [],
      'every kind of request was sent',
    )
  t.same(Object.getOwnPropertyNames(Object.prototype).sort(), prototypeBefore, 'no request polluted Object.prototype')
  t.equal(({} as Record<string, unknown>).polluted, undefined)

  t.same(await checkGuarded(h.url, world), [], 'the sessions created before the run still have their variables (x = 42, y = 7)')
  t.equal((await fetch(`${h.url}/healthz`)).status, 200, 'the service is up')
  await cleanUp(h.url, world)
  const left = async () => (await containersOf(h.deployment)).map((c) => c.Labels['replcast.session']).sort()
  t.ok(await waitFor(async () => JSON.stringify(await left()) === JSON.stringify(guarded), 20_000), 'no container is left but the guarded sessions’')
  t.same(await left(), guarded)
})
