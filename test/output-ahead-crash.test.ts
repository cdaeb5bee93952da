// Output handed to a local SSE reader before Redis stored it, by an instance that then dies before
// the write lands: the instance that adopts the session goes on from what Redis holds. Where the
// sandbox's log still has that output, it is logged again under the same ids (the reader already
// has it); where the log no longer reaches back (it keeps its last 2 MB), a `limit` event says
// output was lost, under an id past any the dead instance may have handed out, so a reader that
// resumes from what it has still gets every later event, once.
import t from 'tap'
import { API_KEY } from './helpers/app.js'
import { createSession, readSse, stdoutOf, type SseEvent } from './helpers/client.js'
import { startPrivateRedis, writePauser } from './helpers/private-redis.js'
import { doneInContainerLog, touch } from './helpers/sandbox-signal.js'
import { isolatedServer, killHard } from './helpers/server-process.js'
import { waitFor } from './helpers/wait.js'
import { redisKeys } from '../src/store/keys.js'

const auth = { authorization: `Bearer ${API_KEY}` }

/** Stream ids ("ms-seq") in the order Redis keeps them. */
const idAfter = (a: string, b: string) => {
  const [am, as] = a.split('-').map(Number) as [number, number]
  const [bm, bs] = b.split('-').map(Number) as [number, number]
  return am > bm || (am === bm && as > bs)
}

t.test('output a dead instance handed its reader before Redis stored it: the reader resumes and gets every later event once', async (t) => {
  const redis = await startPrivateRedis()
  t.teardown(() => redis.destroy())
  const h = await isolatedServer(t, 'ahead-crash', { REDIS_URL: redis.url })
  const { admin, pause } = writePauser(t, redis.url)

  const sid = await createSession(h.server.url, { limits: { output_bytes: 10_000_000 } })
  // "start" once /tmp/go1 exists; then, once /tmp/go2 exists, about 3 MB: more than the container log keeps.
  const code = [
    'import os, time',
    'while not os.path.exists("/tmp/go1"):',
    '    time.sleep(0.005)',
    'print("start", flush=True)',
    'while not os.path.exists("/tmp/go2"):',
    '    time.sleep(0.05)',
    'for i in range(3000):',
    '    print(str(i).rjust(999, "x"), flush=True)',
    'print("after", flush=True)',
  ].join('\n')
  const res = await fetch(`${h.server.url}/v1/sessions/${sid}/executions`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({ code, timeout_s: 60 }),
  })
  const eid = res.headers.get('location')!.split('/').pop()!
  const before: SseEvent[] = []
  let running!: () => void
  const isRunning = new Promise<void>((resolve) => (running = resolve))
  const reading = readSse(res, (e) => {
    before.push(e)
    if (e.event === 'status' && e.data.state === 'running') running()
    return e.event === 'stdout'
  })
  await isRunning
  await pause(true)
  await touch(sid, '/tmp/go1')
  await reading
  const start = before.at(-1)!
  t.equal(start.data.text, 'start\n', 'the reader got "start"')
  const stored = async () =>
    (await admin.xrange(redisKeys(h.env.REPLCAST_KEY_PREFIX!).events(sid, eid), '-', '+')).map(([id, [, json]]) => ({ id, json: json! }))
  t.notOk(
    (await stored()).some(({ json }) => json.includes('start')),
    'Redis had not stored it',
  )

  await killHard(h.server)
  await pause(false)
  await touch(sid, '/tmp/go2')
  t.ok(await waitFor(() => doneInContainerLog(sid, eid), 60000), 'the code ended while no instance was attached')
  await h.respawn()

  const again = await fetch(`${h.server.url}/v1/sessions/${sid}/executions/${eid}/events`, {
    headers: { ...auth, accept: 'text/event-stream', 'last-event-id': start.id },
    signal: AbortSignal.timeout(60000),
  })
  t.equal(again.status, 200, 'the reader resumes from the id it has')
  const after = await readSse(again)
  const limit = after.find((e) => e.event === 'limit')
  t.equal(limit?.data.what, 'detached_output', 'a limit event says output was lost')
  t.ok(
    after.every((e) => idAfter(e.id, start.id)),
    'every event after the resume comes under an id past the one the reader has',
  )
  t.equal(new Set(after.map((e) => e.id)).size, after.length, 'no id twice')
  t.ok(stdoutOf(after).endsWith('after\n'), 'the output the log still held arrived, to the end')
  t.equal(after.at(-1)?.event, 'done')
  t.equal(after.at(-1)?.data.status, 'ok')
  const log = await stored()
  t.notOk(
    log.some(({ id, json }) => id === start.id && !json.includes('start')),
    'the id the reader got for "start" names no other event in Redis',
  )
})
