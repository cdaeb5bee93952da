// Shell executions (language: "bash"): a script run as a child process of the REPL in /workspace,
// with live output, exit codes in done, interrupt, timeout and output caps; Python's state untouched.
import t from 'tap'
import { API_KEY, startApp } from './helpers/app.js'
import { api, createSession, readSse, stdoutOf, type SseEvent } from './helpers/client.js'
import { getFile } from './helpers/files.js'
import { waitFor } from './helpers/wait.js'

/** Runs an execution with Accept: text/event-stream and reads it to its done. */
async function run(base: string, sid: string, body: Record<string, unknown>): Promise<SseEvent[]> {
  const res = await fetch(`${base}/v1/sessions/${sid}/executions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify(body),
  })
  if (res.status !== 200) throw new Error(`execute answered ${res.status}: ${await res.text()}`)
  return readSse(res, (e) => e.event === 'done')
}
const bash = (base: string, sid: string, code: string, extra: Record<string, unknown> = {}) => run(base, sid, { code, language: 'bash', ...extra })
const doneOf = (events: SseEvent[]) => events.find((e) => e.event === 'done')!.data

t.test('bash executions', async (t) => {
  const h = await startApp(t, { SANDBOX_POOL_SIZE: '0', INTERRUPT_GRACE_MS: '3000' })
  const sid = await createSession(h.url)

  t.test('runs in /workspace; stdout and stderr are events; done has exit_code 0', async (t) => {
    const events = await bash(h.url, sid, 'pwd; echo out; echo err >&2; id -u')
    t.equal(stdoutOf(events), '/workspace\nout\n1000\n')
    t.equal(
      events
        .filter((e) => e.event === 'stderr')
        .map((e) => e.data.text)
        .join(''),
      'err\n',
    )
    t.match(doneOf(events), { status: 'ok', exit_code: 0 })
    t.equal(events.filter((e) => e.event === 'done').length, 1)
  })

  t.test('a nonzero exit status is status error with its exit_code', async (t) => {
    t.match(doneOf(await bash(h.url, sid, 'echo failing; exit 3')), { status: 'error', exit_code: 3 })
    t.match(doneOf(await bash(h.url, sid, 'no-such-command-here')), { status: 'error', exit_code: 127 })
    t.match(doneOf(await bash(h.url, sid, 'set -e; false; echo unreachable')), { status: 'error', exit_code: 1 })
  })

  t.test('Python executions have no exit_code; language defaults to python', async (t) => {
    const done = doneOf(await run(h.url, sid, { code: 'print(1)' }))
    t.equal(done.status, 'ok')
    t.notOk('exit_code' in done)
    t.equal(doneOf(await run(h.url, sid, { code: 'print(1)', language: 'python' })).status, 'ok')
  })

  t.test('the Python namespace is untouched; the workspace is shared', async (t) => {
    await run(h.url, sid, { code: 'x = 1' })
    t.equal(stdoutOf(await bash(h.url, sid, 'x=2; echo $x; mkdir -p made && echo from-bash > made/by.txt')), '2\n')
    t.equal(stdoutOf(await run(h.url, sid, { code: "print(x, open('made/by.txt').read().strip())" })), '1 from-bash\n')
    t.equal((await getFile(h.url, sid, 'made/by.txt')).bytes.toString(), 'from-bash\n')
  })

  t.test('output is live', async (t) => {
    const events = await bash(h.url, sid, 'echo first; sleep 1; echo second')
    const outs = events.filter((e) => e.event === 'stdout')
    const first = outs.find((e) => e.data.text.includes('first'))!
    const second = outs.find((e) => e.data.text.includes('second'))!
    t.ok(second.at - first.at >= 800, `second came ${Math.round(second.at - first.at)} ms after first (slept 1000 ms)`)
  })

  t.test('interrupt kills the script and what it started; the session goes on', async (t) => {
    const pending = bash(h.url, sid, 'sleep 300 & echo started; sleep 300')
    t.ok(await waitFor(async () => (await api(h.url, 'GET', `/v1/sessions/${sid}`)).body.status === 'busy'), 'it runs')
    t.ok(await waitFor(async () => (await api(h.url, 'POST', `/v1/sessions/${sid}/interrupt`)).status === 202))
    const events = await pending
    t.match(doneOf(events), { status: 'interrupted', exit_code: 137 })
    const left = await bash(h.url, sid, "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c '^sleep 300' || true")
    t.equal(stdoutOf(left), '0\n', 'no sleep is left running')
    t.equal(stdoutOf(await run(h.url, sid, { code: 'print(x + 1)' })), '2\n', 'Python state survived')
  })

  t.test('a timeout ends the script with status timeout', async (t) => {
    const t0 = performance.now()
    const events = await bash(h.url, sid, 'sleep 300', { timeout_s: 1 })
    t.match(doneOf(events), { status: 'timeout', exit_code: 137 })
    t.ok(performance.now() - t0 < 10_000, 'promptly')
    t.equal(stdoutOf(await bash(h.url, sid, 'echo alive')), 'alive\n')
  })

  t.test('the JSON answer carries exit_code too', async (t) => {
    const r = await api(h.url, 'POST', `/v1/sessions/${sid}/executions`, { code: 'exit 4', language: 'bash' }, { headers: { accept: 'application/json' } })
    t.equal(r.status, 200)
    t.match(r.body.events.at(-1), { type: 'done', status: 'error', exit_code: 4 })
  })

  t.test('an unknown language is a validation error', async (t) => {
    const r = await api(h.url, 'POST', `/v1/sessions/${sid}/executions`, { code: 'puts 1', language: 'ruby' })
    t.equal(r.status, 400)
    t.equal(r.body.code, 'validation_failed')
  })
})

t.test('output caps apply to bash', async (t) => {
  const h = await startApp(t, { SANDBOX_POOL_SIZE: '0' })
  const sid = await createSession(h.url, { limits: { output_bytes: 2000 } })
  const events = await bash(h.url, sid, 'head -c 100000 /dev/zero | tr "\\0" z; echo')
  t.equal(stdoutOf(events).length, 2000)
  const limit = events.find((e) => e.event === 'limit')
  t.match(limit?.data, { what: 'stream_bytes', dropped_bytes: 98001 })
  t.match(doneOf(events), { status: 'ok', exit_code: 0 })
})

t.test('a queued bash execution is still bash after an API restart', async (t) => {
  const h = await startApp(t, { SANDBOX_POOL_SIZE: '0' })
  const sid = await createSession(h.url)
  const headers = { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json', accept: 'text/event-stream' }
  const start = async (body: Record<string, unknown>) => {
    const res = await fetch(`${h.url}/v1/sessions/${sid}/executions`, { method: 'POST', headers, body: JSON.stringify(body) })
    return (await readSse(res, (e) => e.event === 'status'))[0]!.data
  }
  t.equal((await start({ code: "print('go', flush=True)\nimport time\ntime.sleep(8)" })).state, 'running')
  const queued = await start({ code: 'echo queued-bash; exit 5', language: 'bash' })
  t.equal(queued.state, 'queued')
  await h.restart()
  const events = await readSse(await fetch(`${h.url}/v1/sessions/${sid}/executions/${queued.execution_id}/events`, { headers }), (e) => e.event === 'done')
  t.equal(stdoutOf(events), 'queued-bash\n')
  t.match(doneOf(events), { status: 'error', exit_code: 5 })
})
