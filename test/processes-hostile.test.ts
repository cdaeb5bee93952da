// A background process that floods 200 MB of output: the first PROCESS_OUTPUT_BYTES are kept, then one
// `limit` event, the rest is dropped inside the sandbox, and the API process (a child process here,
// its RSS sampled from /proc) grows by a small fraction of the flood. Meanwhile the session runs
// code, and a client that opened the output and never reads it blocks nothing.
import t from 'tap'
import { request } from 'node:http'
import { api, executeSse, readSse, stdoutOf } from './helpers/client.js'
import { API_KEY } from './helpers/app.js'
import { rssOf } from './helpers/files.js'
import { outputOf } from './helpers/processes.js'
import { isolatedServer } from './helpers/server-process.js'

const MB = 1_000_000
const FLOOD_MB = 200
const KEPT_BYTES = 10_000_000
/** Allowed growth of the API's RSS over its level before the flood: it handles the 10 MB kept, never the 200 MB. */
const MAX_GROWTH_MB = 100

t.test(`a ${FLOOD_MB} MB flood from a background process is capped without growing the API's memory`, async (t) => {
  const s = await isolatedServer(t, 'processes-flood', { SANDBOX_POOL_SIZE: '0', PROCESS_OUTPUT_BYTES: String(KEPT_BYTES) })
  const base = s.server.url
  const pid = s.server.child.pid!
  const sid = (await api(base, 'POST', '/v1/sessions', {})).body.id
  await executeSse(base, sid, 'print("warm")')
  const baseline = rssOf(pid)
  let peak = baseline
  const sampler = setInterval(() => (peak = Math.max(peak, rssOf(pid))), 20)
  t.teardown(() => clearInterval(sampler))

  const flood = await api(base, 'POST', `/v1/sessions/${sid}/processes`, {
    command: `head -c ${FLOOD_MB * MB} /dev/zero | tr '\\0' x; echo; echo flood-done > flood-done.txt`,
  })
  t.equal(flood.status, 201)
  // A client that opens the output and never reads a byte of it.
  const stalled = request(`${base}/v1/sessions/${sid}/processes/${flood.body.id}/output`, {
    headers: { authorization: `Bearer ${API_KEY}`, accept: 'text/event-stream' },
  })
  stalled.on('response', (res) => res.pause())
  stalled.on('error', () => undefined)
  stalled.end()
  t.teardown(() => stalled.destroy())

  const t0 = performance.now()
  const during = await executeSse(base, sid, 'print(sum(range(10)))', { timeout_s: 30 })
  t.equal(stdoutOf(during.events), '45\n', `the session runs code during the flood (${Math.round(performance.now() - t0)} ms)`)

  const events = await readSse(await outputOf(base, sid, flood.body.id))
  const kept = stdoutOf(events)
  t.equal(kept.length, KEPT_BYTES, 'exactly PROCESS_OUTPUT_BYTES of it reached the client')
  t.equal(events.filter((e) => e.event === 'limit').length, 1, 'one limit event')
  t.match(events.at(-1), { event: 'exit', data: { exit_code: 0, dropped_bytes: FLOOD_MB * MB + 1 - KEPT_BYTES } })
  t.equal(stdoutOf((await executeSse(base, sid, "print(open('flood-done.txt').read().strip())")).events), 'flood-done\n', 'it ran to its end')
  clearInterval(sampler)
  const growth = (peak - baseline) / 2 ** 20
  t.comment(`API rss ${(baseline / 2 ** 20).toFixed(0)} MB before, peak +${growth.toFixed(0)} MB during a ${FLOOD_MB} MB flood (${KEPT_BYTES / MB} MB kept)`)
  t.ok(growth < MAX_GROWTH_MB, `the API grew by ${growth.toFixed(0)} MB (< ${MAX_GROWTH_MB})`)
  const p = await api(base, 'GET', `/v1/sessions/${sid}/processes/${flood.body.id}`)
  t.match(p.body, { status: 'exited', exit_code: 0 })
})
