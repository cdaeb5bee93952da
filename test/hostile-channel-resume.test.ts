// Re-adoption after an API crash must not trust what sandbox code can write: a forged huge `seq`
// must not make the host drop the frames after it, and output written while the API was down is
// recovered from the container's log up to its bound; past it a `limit` event says so. The neighbour
// (another tenant) is probed and the new API process measured while it catches up.
import t, { type Test } from 'tap'
import { API_KEY, OTHER_KEY } from './helpers/app.js'
import { api, createSession, readSse, stdoutOf, untilStdout, type SseEvent } from './helpers/client.js'
import { NeighbourProbe, fmtStats } from './helpers/neighbour.js'
import { CHANNEL_PRELUDE, figuresOf, fmtFigures } from './helpers/channel-attack.js'
import { isolatedServer, killHard } from './helpers/server-process.js'
import { doneInContainerLog, touch } from './helpers/sandbox-signal.js'
import { waitFor } from './helpers/wait.js'

const auth = { authorization: `Bearer ${API_KEY}` }

/** Starts `code` with an SSE stream; resolves once `until` saw the event it waits for. */
async function start(url: string, sid: string, code: string, until: (e: SseEvent) => boolean) {
  const res = await fetch(`${url}/v1/sessions/${sid}/executions`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({ code, timeout_s: 30 }),
  })
  const eid = res.headers.get('location')!.split('/').pop()!
  return { eid, events: await readSse(res, until) }
}

/** The rest of an execution's events after `lastId`, read from the (new) API process, with the neighbour probed and the process measured meanwhile. */
async function rest(
  t: Test,
  h: Awaited<ReturnType<typeof isolatedServer>>,
  sid: string,
  eid: string,
  lastId: string,
  neighbour: string,
  watch: (e: SseEvent) => void = () => undefined,
) {
  const probe = new NeighbourProbe(h.server.url, neighbour, OTHER_KEY)
  const before = figuresOf(h.server)
  probe.start()
  try {
    const res = await fetch(`${h.server.url}/v1/sessions/${sid}/executions/${eid}/events`, {
      headers: { ...auth, accept: 'text/event-stream', 'last-event-id': lastId },
      signal: AbortSignal.timeout(60000),
    })
    t.equal(res.status, 200, 'the events stream answers')
    return res.status === 200
      ? await readSse(res, (e) => {
          watch(e)
          return false
        })
      : []
  } finally {
    const stats = await probe.stop()
    t.comment(fmtStats(stats))
    t.comment(fmtFigures(t.name, before, figuresOf(h.server)))
    t.same(stats.failures, [], 'the neighbour answered every print(1)')
    t.ok(stats.maxMs < 2000, `the neighbour's slowest print(1) took ${stats.maxMs.toFixed(0)} ms (< 2000)`)
  }
}

t.test('a forged huge seq does not make the host drop later frames after a re-adoption', async (t) => {
  const h = await isolatedServer(t, 'seq')
  const neighbour = await createSession(h.server.url, {}, OTHER_KEY)
  const sid = await createSession(h.server.url)
  const code =
    CHANNEL_PRELUDE +
    [
      'raw({"v": 1, "type": "stream", "name": "stdout", "exec_id": _me, "text": "forged\\n", "seq": 10**15})',
      'print("before", flush=True)',
      'i = 0',
      'while not os.path.exists("/tmp/stop"):',
      '    print(f"tick {i}", flush=True)',
      '    i += 1',
      '    time.sleep(0.2)',
      'print("end")',
    ].join('\n')
  const { eid, events: before } = await start(h.server.url, sid, code, (e) => e.event === 'stdout' && String(e.data.text).includes('before'))
  await killHard(h.server)
  await h.respawn()
  // Ticks written while the API was down come from the container log, at once; the code stops
  // after three have come live (at the code's pace), so both paths and the seam between them are crossed.
  let paced = 0
  let prev = 0
  const stop: { touched: Promise<void> | null } = { touched: null }
  const after = await rest(t, h, sid, eid, before.at(-1)!.id, neighbour, (e) => {
    if (e.event !== 'stdout') return
    paced = prev && e.at - prev > 100 ? paced + 1 : 0
    prev = e.at
    if (paced === 3) stop.touched ??= touch(sid, '/tmp/stop')
  })
  t.ok(stop.touched, 'ticks arrived live after the replay')
  await stop.touched
  const all = [...before, ...after]
  const text = stdoutOf(all)
  const n = (text.match(/tick /g) ?? []).length
  const ticks = Array.from({ length: n }, (_, i) => `tick ${i}\n`).join('')
  t.equal(text, `forged\nbefore\n${ticks}end\n`, `every line after the forged frame arrived, in order, once (${n} ticks)`)
  t.equal(new Set(all.map((e) => e.id)).size, all.length, 'no event twice')
  t.equal(all.filter((e) => e.event === 'done').length, 1, 'one done')
  t.equal(all.at(-1)?.data.status, 'ok')
})

t.test('output written while the API was down past the container log bound ends in a limit event, not silence', async (t) => {
  const h = await isolatedServer(t, 'detached')
  const neighbour = await createSession(h.server.url, {}, OTHER_KEY)
  const sid = await createSession(h.server.url, { limits: { output_bytes: 10_000_000 } })
  // About 3 MB of frames once /tmp/go exists: more than the container log keeps (2 MB).
  const code = [
    'import os, time',
    'print("start", flush=True)',
    'while not os.path.exists("/tmp/go"):',
    '    time.sleep(0.05)',
    'for i in range(3000):',
    '    print(str(i).rjust(999, "x"), flush=True)',
    'print("after", flush=True)',
  ].join('\n')
  const { eid, events: before } = await start(h.server.url, sid, code, untilStdout('start\n'))
  await killHard(h.server)
  await touch(sid, '/tmp/go')
  t.ok(await waitFor(() => doneInContainerLog(sid, eid), 60000), 'the code ended while the API was down')
  await h.respawn()
  const after = await rest(t, h, sid, eid, before.at(-1)!.id, neighbour)
  const limit = after.find((e) => e.event === 'limit')
  t.equal(limit?.data.what, 'detached_output', 'a limit event says output written while detached was lost')
  const text = stdoutOf(after)
  t.ok(text.endsWith('after\n'), 'what the log still held arrived, to the end')
  const lines = text.split('\n').filter((l) => l.startsWith('x'))
  t.ok(lines.length > 0 && lines.length < 3000, `${lines.length} of 3000 lines were recovered`)
  t.ok(
    lines.every((l, i) => i === 0 || Number(l.replace(/^x+/, '')) === Number(lines[i - 1]!.replace(/^x+/, '')) + 1),
    'the recovered lines are the last ones, contiguous',
  )
  t.ok(after.indexOf(limit!) < after.findIndex((e) => e.event === 'stdout'), 'the limit event comes before the recovered output')
  t.equal(after.at(-1)?.event, 'done')
  t.equal(after.at(-1)?.data.status, 'ok')
  const s = await api(h.server.url, 'GET', `/v1/sessions/${sid}`)
  t.equal(s.body.status, 'ready', 'the session is usable')
})
