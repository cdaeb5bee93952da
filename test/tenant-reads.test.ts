// Reads that could load everything: the JSON reply of a 200 MB execution and ten concurrent GETs of
// it must stream from Redis page by page, so the API process (a child process here, its RSS
// sampled from /proc) grows by a small fraction of the data while a neighbour tenant keeps working.
// The API runs with a V8 heap cap well below the data: left alone, V8 lets garbage grow to a few
// times the live heap before collecting it, which would measure its laziness instead of what a read
// holds; with the cap, a read that held a whole log could not fit at all.
import t from 'tap'
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { API_KEY, OTHER_KEY } from './helpers/app.js'
import { api, createSession } from './helpers/client.js'
import { fmtStats, NeighbourProbe } from './helpers/neighbour.js'
import { isolatedServer } from './helpers/server-process.js'

const MB = 1_000_000
const OUTPUT_MB = 200
const READERS = 10
/**
 * Allowed growth of the API's RSS over its level before the reads. A reader holds one page (256 kB)
 * and its copies; what comes on top is garbage awaiting collection: V8 frees dead large strings at
 * the next scavenge and dead socket buffers once ~64 MB of them have piled up, so 2 GB of reads
 * measure 45–105 MB here, the most under load. A read that held its log would add 200 MB per reader.
 */
const MAX_GROWTH_MB = 150
/** Past this the API is killed, so an unbounded read fails the test instead of the machine. */
const SAFETY_RSS_MB = 3000
const HEAP_CAP_MB = 256

function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return m ? Number(m[1]) / 1024 : NaN
}

/** Samples a process's RSS every 50 ms until stopped; kills it past the safety level. */
function sampleRss(pid: number, kill: () => void) {
  let peak = 0
  const timer = setInterval(() => {
    try {
      const mb = rssMb(pid)
      peak = Math.max(peak, mb)
      if (mb > SAFETY_RSS_MB) kill()
    } catch {
      /* the process is gone */
    }
  }, 50)
  timer.unref() // a failed read must not keep the test process alive
  return {
    stop: () => {
      clearInterval(timer)
      return peak
    },
  }
}

/** Reads a response body without keeping it: its length and SHA-256. */
async function digestBody(res: Response): Promise<{ bytes: number; sha: string }> {
  const hash = createHash('sha256')
  let bytes = 0
  const reader = res.body!.getReader()
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    bytes += value.byteLength
    hash.update(value)
  }
  return { bytes, sha: hash.digest('hex') }
}

t.test(`the JSON reply and ${READERS} concurrent GETs of a ${OUTPUT_MB} MB execution stream with bounded memory`, async (t) => {
  const h = await isolatedServer(t, 'reads', {
    REPLCAST_TENANT_LIMITS: JSON.stringify({ alpha: { max_output_bytes: 2 * OUTPUT_MB * MB, max_event_bytes: 4 * OUTPUT_MB * MB } }),
    NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --max-old-space-size=${HEAP_CAP_MB}`,
  })
  const pid = h.server.child.pid!
  const sid = await createSession(h.server.url, { limits: { memory_mb: 256, output_bytes: (OUTPUT_MB + 10) * MB } })
  const nb = await createSession(h.server.url, { limits: { memory_mb: 256 } }, OTHER_KEY)
  const probe = new NeighbourProbe(h.server.url, nb, OTHER_KEY)
  await api(h.server.url, 'POST', `/v1/sessions/${sid}/executions`, { code: 'print(1)' })
  const rss0 = rssMb(pid)
  probe.start()
  t.teardown(() => probe.stop())

  // The JSON reply: the execution writes 200 MB, the reply comes once it ends. The output is paced
  // (1 MB per 0.05 s) so that what is measured is the reply more than the host's backlog of appends
  // when a sandbox writes faster than they reach Redis (the output path has no backpressure).
  const sampleWrite = sampleRss(pid, () => h.server.child.kill('SIGKILL'))
  const t0 = performance.now()
  const res = await fetch(`${h.server.url}/v1/sessions/${sid}/executions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      code: `import time\ns = "x" * ${MB - 1}\nfor i in range(${OUTPUT_MB}):\n    print(s, flush=True); time.sleep(0.05)`,
      timeout_s: 600,
    }),
  })
  // The reply starts once the execution has ended: what follows is the reply alone.
  const peakWrite = sampleWrite.stop()
  const writeS = (performance.now() - t0) / 1000
  const rssReply = rssMb(pid)
  const sampleReply = sampleRss(pid, () => h.server.child.kill('SIGKILL'))
  const text = await res.text()
  const peakReply = sampleReply.stop()
  t.equal(res.status, 200, 'the JSON reply answers 200')
  const body = JSON.parse(text) as { id: string; status: string; events: Array<{ type: string; text?: string }> }
  t.equal(body.status, 'ok')
  t.equal(body.events[0]?.type, 'status', 'the first event is status')
  t.equal(body.events.at(-1)?.type, 'done', 'the last event is done')
  const out = body.events.filter((e) => e.type === 'stdout').reduce((n, e) => n + (e.text?.length ?? 0), 0)
  t.equal(out, OUTPUT_MB * MB, `the reply holds all ${OUTPUT_MB} MB of output`)
  const sha = createHash('sha256').update(text).digest('hex')
  const bytes = Buffer.byteLength(text)
  t.comment(
    `writing ${OUTPUT_MB} MB took ${writeS.toFixed(1)} s; API RSS ${rss0.toFixed(0)} MB before, peak ${peakWrite.toFixed(0)} MB (not asserted: the write path)`,
  )
  t.comment(`JSON reply: ${(bytes / MB).toFixed(1)} MB; API RSS ${rssReply.toFixed(0)} MB when it began, peak ${peakReply.toFixed(0)} MB`)
  t.ok(peakReply - rssReply < MAX_GROWTH_MB, `RSS grew ${(peakReply - rssReply).toFixed(0)} MB during the JSON reply (limit ${MAX_GROWTH_MB} MB)`)

  // Ten concurrent GETs of the same execution, each the same bytes as the JSON reply.
  const rss1 = rssMb(pid)
  const sampleB = sampleRss(pid, () => h.server.child.kill('SIGKILL'))
  const t1 = performance.now()
  const reads = await Promise.all(
    Array.from({ length: READERS }, async () => {
      const r = await fetch(`${h.server.url}/v1/sessions/${sid}/executions/${body.id}`, { headers: { authorization: `Bearer ${API_KEY}` } })
      return { status: r.status, type: r.headers.get('content-type'), ...(await digestBody(r)) }
    }),
  )
  const peakB = sampleB.stop()
  const readS = (performance.now() - t1) / 1000
  for (const [i, r] of reads.entries()) {
    t.equal(r.status, 200, `GET ${i + 1}: 200`)
    t.match(r.type, /^application\/json/, `GET ${i + 1}: JSON`)
    t.ok(r.bytes === bytes && r.sha === sha, `GET ${i + 1}: ${(r.bytes / MB).toFixed(1)} MB, byte for byte the JSON reply`)
  }
  t.comment(
    `${READERS} GETs: ${((READERS * bytes) / MB).toFixed(0)} MB in ${readS.toFixed(1)} s; API RSS ${rss1.toFixed(0)} MB before, peak ${peakB.toFixed(0)} MB`,
  )
  t.ok(peakB - rss1 < MAX_GROWTH_MB, `RSS grew ${(peakB - rss1).toFixed(0)} MB during the concurrent reads (limit ${MAX_GROWTH_MB} MB)`)

  const stats = await probe.stop()
  t.comment(fmtStats(stats))
  t.equal(stats.failures.length, 0, `the neighbour never failed (${stats.failures.slice(0, 2).join('; ')})`)
  t.equal(h.server.child.exitCode ?? h.server.child.signalCode, null, 'the API is still up')
})
