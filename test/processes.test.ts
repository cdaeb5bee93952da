// Background processes (POST /v1/sessions/{id}/processes): programs that keep running beside the
// session's executions, their output live and resumable, stdin, signals, exit codes, delete,
// restart, max_processes, caps, and other tenants kept out.
import t from 'tap'
import { API_KEY, OTHER_KEY, startApp } from './helpers/app.js'
import { api, createSession, executeSse, readSse, stdoutOf } from './helpers/client.js'
import { countInSandbox, outputOf, readOutput, startProcess, stderrOf, writeStdin } from './helpers/processes.js'
import { waitFor } from './helpers/wait.js'

const exitOf = (events: Array<{ event: string; data: any }>) => events.filter((e) => e.event === 'exit')

/** A client following the process's output, once it has had its first line; `events` resolves at the exit. */
async function following(base: string, sid: string, pid: string): Promise<{ events: Promise<Array<{ event: string; data: any }>> }> {
  let attached!: () => void
  const first = new Promise<void>((resolve) => (attached = resolve))
  const events = readSse(await outputOf(base, sid, pid), (e) => {
    if (e.event === 'stdout') attached()
    return e.event === 'exit'
  })
  await Promise.race([first, events])
  return { events }
}

t.test('background processes', async (t) => {
  const h = await startApp(t, { REPLCAST_TENANT_LIMITS: JSON.stringify({ alpha: { max_processes: 4 } }), PROCESS_OUTPUT_BYTES: '20000' })
  const sid = await createSession(h.url)
  const path = (pid = '') => `/v1/sessions/${sid}/processes${pid ? `/${pid}` : ''}`

  t.test('a python3 -m http.server process answers code in the same session over loopback', async (t) => {
    await executeSse(h.url, sid, "open('hello.txt', 'w').write('served from the workspace')")
    const p = await startProcess(h.url, sid, { command: 'exec python3 -m http.server 8765 --bind 127.0.0.1' })
    t.match(p, { status: 'running', exit_code: null, command: 'exec python3 -m http.server 8765 --bind 127.0.0.1', cwd: '' })
    t.match(p.id, /^prc_[A-Za-z0-9]{20}$/)
    const got = await api(h.url, 'GET', path(p.id))
    t.same(got.body, p, 'GET returns it')
    t.ok(
      (await api(h.url, 'GET', path())).body.processes.some((x: any) => x.id === p.id),
      'the list has it',
    )
    const code = [
      'import time, urllib.request',
      'for _ in range(200):',
      '    try:',
      "        print(urllib.request.urlopen('http://127.0.0.1:8765/hello.txt', timeout=5).read().decode())",
      '        break',
      '    except OSError:',
      '        time.sleep(0.05)',
    ].join('\n')
    const run = await executeSse(h.url, sid, code)
    t.equal(stdoutOf(run.events), 'served from the workspace\n', 'sandbox code reached the server over loopback')
    const log = await readOutput(h.url, sid, p.id, (e) => e.event === 'stderr' && stderrOf([e]).includes('GET /hello.txt'))
    t.match(stderrOf(log), /"GET \/hello\.txt HTTP\/1\.1" 200/, "the server's request log is its output")
    t.equal((await api(h.url, 'DELETE', path(p.id))).status, 204)
    t.equal(await countInSandbox(h.url, sid, 'http.server'), 0, 'no server is left in the sandbox')
  })

  t.test('output is live and resumable: a client that leaves and comes back gets every event once', async (t) => {
    const p = await startProcess(h.url, sid, { command: 'for i in $(seq 1 8); do echo "line $i"; sleep 0.15; done; echo done >&2' })
    let seen = 0
    const first = await readSse(await outputOf(h.url, sid, p.id), (e) => e.event === 'stdout' && ++seen === 3)
    const rest = await readSse(await outputOf(h.url, sid, p.id, first.at(-1)!.id))
    const all = [...first, ...rest]
    t.equal(stdoutOf(all), Array.from({ length: 8 }, (_, i) => `line ${i + 1}\n`).join(''), 'all of it, in order')
    t.equal(stderrOf(all), 'done\n')
    t.equal(new Set(all.map((e) => e.id)).size, all.length, 'no event twice')
    t.equal(exitOf(all).length, 1, 'one exit')
    t.equal(all.at(-1)!.event, 'exit', 'the exit is last')
    t.match(exitOf(all)[0]!.data, { type: 'exit', exit_code: 0 })
    t.notOk('pos' in all[0]!.data, "the host's frame position is not shown")
    const lines = all.filter((e) => e.event === 'stdout')
    t.ok(lines.at(-1)!.at - lines[0]!.at >= 700, `live: the lines came over ${Math.round(lines.at(-1)!.at - lines[0]!.at)} ms (slept 1050)`)
    const replay = await readSse(await outputOf(h.url, sid, p.id))
    t.same(
      replay.map((e) => e.id),
      all.map((e) => e.id),
      'a read from the start gives the same events',
    )
    const viaQuery = await readSse(await outputOf(h.url, sid, p.id, undefined, `?after=${encodeURIComponent(first.at(-1)!.id)}`))
    t.same(
      viaQuery.map((e) => e.id),
      rest.map((e) => e.id),
      '?after= works like Last-Event-ID',
    )
    const atEnd = await outputOf(h.url, sid, p.id, all.at(-1)!.id)
    t.equal(atEnd.status, 204, 'at the exit: 204, so EventSource stops')
    await atEnd.text()
    const past = await outputOf(h.url, sid, p.id, '18446744073709551615-18446744073709551615')
    t.equal(past.status, 204, 'past the end: 204')
    await past.text()
    t.match((await api(h.url, 'GET', path(p.id))).body, { status: 'exited', exit_code: 0, ended_at: String })
  })

  t.test('exit codes: its own, and 128 + N when signal N ended it', async (t) => {
    const three = await startProcess(h.url, sid, { command: 'echo bye; exit 3' })
    const killed = await startProcess(h.url, sid, { command: 'kill -9 $$' })
    t.match(exitOf(await readOutput(h.url, sid, three.id))[0]!.data, { exit_code: 3 })
    t.match(exitOf(await readOutput(h.url, sid, killed.id))[0]!.data, { exit_code: 137 })
    t.match((await api(h.url, 'GET', path(three.id))).body, { status: 'exited', exit_code: 3 })
  })

  t.test('cwd and env', async (t) => {
    await executeSse(h.url, sid, "import os; os.makedirs('sub/dir', exist_ok=True)")
    const p = await startProcess(h.url, sid, { command: 'pwd; echo "$GREETING"', cwd: 'sub/dir', env: { GREETING: 'hi there' } })
    t.equal(stdoutOf(await readOutput(h.url, sid, p.id)), '/workspace/sub/dir\nhi there\n')
    const bad = await api(h.url, 'POST', path(), { command: 'true', cwd: 'no/such/dir' })
    t.equal(bad.status, 400)
    t.equal(bad.body.code, 'invalid_cwd')
    t.notOk(
      (await api(h.url, 'GET', path())).body.processes.some((x: any) => x.command === 'true'),
      'a process that could not start is not listed',
    )
  })

  t.test('stdin is written as sent, and eof closes it', async (t) => {
    const p = await startProcess(h.url, sid, { command: 'while IFS= read -r line; do echo "got $line"; done; echo "eof"' })
    t.equal((await writeStdin(h.url, sid, p.id, 'one\ntwo\n')).status, 204)
    t.equal((await writeStdin(h.url, sid, p.id, Buffer.from('three\n'), true)).status, 204)
    const events = await readOutput(h.url, sid, p.id)
    t.equal(stdoutOf(events), 'got one\ngot two\ngot three\neof\n')
    t.match(exitOf(events)[0]!.data, { exit_code: 0 })
    const late = await writeStdin(h.url, sid, p.id, 'late')
    t.equal(late.status, 409)
    t.equal((await late.json()).code, 'process_exited')
    const big = await writeStdin(h.url, sid, p.id, Buffer.alloc(1024 * 1024 + 1))
    t.equal(big.status, 413, 'more than 1 MiB at once is refused')
    t.equal((await big.json()).code, 'payload_too_large')
  })

  t.test('stdin after eof is refused', async (t) => {
    const p = await startProcess(h.url, sid, { command: 'sleep 30' })
    t.equal((await writeStdin(h.url, sid, p.id, '', true)).status, 204)
    const again = await writeStdin(h.url, sid, p.id, 'more')
    t.equal(again.status, 409)
    t.equal((await again.json()).code, 'stdin_closed')
    t.equal((await api(h.url, 'DELETE', path(p.id))).status, 204)
  })

  t.test('a trapped TERM runs its handler', async (t) => {
    const p = await startProcess(h.url, sid, { command: "trap 'echo caught TERM; exit 42' TERM; echo ready; while :; do sleep 0.1; done" })
    await readOutput(h.url, sid, p.id, (e) => e.event === 'stdout')
    t.equal((await api(h.url, 'POST', `${path(p.id)}/signal`, { signal: 'TERM' })).status, 204)
    const events = await readOutput(h.url, sid, p.id)
    t.equal(stdoutOf(events), 'ready\ncaught TERM\n')
    t.match(exitOf(events)[0]!.data, { exit_code: 42 })
    const again = await api(h.url, 'POST', `${path(p.id)}/signal`, { signal: 'TERM' })
    t.equal(again.status, 409)
    t.equal(again.body.code, 'process_exited')
    const bad = await api(h.url, 'POST', `${path(p.id)}/signal`, { signal: 'SIGFOO' })
    t.equal(bad.status, 400)
    t.equal(bad.body.code, 'validation_failed')
  })

  t.test('delete kills the whole process group and forgets it: nothing is left in the sandbox', async (t) => {
    const p = await startProcess(h.url, sid, { command: 'sleep 3001 & sleep 3002 & echo started; wait' })
    await readOutput(h.url, sid, p.id, (e) => e.event === 'stdout')
    t.equal(await countInSandbox(h.url, sid, 'sleep 300'), 3, 'bash (its command line names them) and both children run')
    const follower = await following(h.url, sid, p.id)
    t.equal((await api(h.url, 'DELETE', path(p.id))).status, 204)
    t.match(exitOf(await follower.events), [{ data: { exit_code: 137 } }], 'a reader following it gets its exit (killed: 128 + 9)')
    t.equal(await countInSandbox(h.url, sid, 'sleep 300'), 0, 'none is left once DELETE answered')
    const gone = await api(h.url, 'GET', path(p.id))
    t.equal(gone.status, 404)
    t.equal(gone.body.code, 'process_not_found')
    t.equal((await outputOf(h.url, sid, p.id)).status, 404, 'its output went with it')
    t.notOk((await api(h.url, 'GET', path())).body.processes.some((x: any) => x.id === p.id))
    t.equal((await api(h.url, 'DELETE', path(p.id))).status, 404, 'deleting twice: 404')
  })

  t.test('processes run beside executions: neither waits for the other', async (t) => {
    const slow = fetch(`${h.url}/v1/sessions/${sid}/executions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ code: "print('running', flush=True)\nimport time\ntime.sleep(6)" }),
    })
    const running = await slow
    const head = await readSse(running, (e) => e.event === 'stdout')
    t.ok(head.length > 0)
    const t0 = performance.now()
    const p = await startProcess(h.url, sid, { command: 'echo beside' })
    const events = await readOutput(h.url, sid, p.id)
    t.equal(stdoutOf(events), 'beside\n')
    t.ok(performance.now() - t0 < 3000, `started and ended in ${Math.round(performance.now() - t0)} ms while the execution sleeps 6 s`)
    const sleeper = await startProcess(h.url, sid, { command: 'sleep 60' })
    t.ok(await waitFor(async () => (await api(h.url, 'GET', `/v1/sessions/${sid}`)).body.status === 'ready', 15_000), 'the execution ended')
    t.equal(stdoutOf((await executeSse(h.url, sid, 'print(6 * 7)')).events), '42\n', 'an execution runs while a process runs')
    t.equal((await api(h.url, 'DELETE', path(sleeper.id))).status, 204)
  })

  t.test('output past PROCESS_OUTPUT_BYTES gets one limit event and is dropped; the process goes on', async (t) => {
    const p = await startProcess(h.url, sid, { command: "head -c 200000 /dev/zero | tr '\\0' z; echo; echo kept-running > after-flood.txt; exit 6" })
    const events = await readOutput(h.url, sid, p.id)
    t.equal(stdoutOf(events).length, 20000, 'exactly the cap')
    const limits = events.filter((e) => e.event === 'limit')
    t.equal(limits.length, 1)
    t.match(limits[0]!.data, { what: 'output_bytes' })
    t.match(exitOf(events)[0]!.data, { exit_code: 6, dropped_bytes: 200001 - 20000 })
    t.equal(stdoutOf((await executeSse(h.url, sid, "print(open('after-flood.txt').read().strip())")).events), 'kept-running\n')
  })

  t.test("max_processes (the tenant's limit) counts running processes", async (t) => {
    const left = (await api(h.url, 'GET', path())).body.processes.filter((x: any) => x.status === 'running')
    for (const x of left) await api(h.url, 'DELETE', path(x.id))
    const sleepers: any[] = []
    for (let i = 0; i < 4; i++) sleepers.push(await startProcess(h.url, sid, { command: 'sleep 120' }))
    const fifth = await api(h.url, 'POST', path(), { command: 'sleep 120' })
    t.equal(fifth.status, 409)
    t.match(fifth.body, { code: 'too_many_processes', maximum: 4 })
    t.equal((await api(h.url, 'POST', `${path(sleepers[0].id)}/signal`, { signal: 'KILL' })).status, 204)
    t.ok(await waitFor(async () => (await api(h.url, 'GET', path(sleepers[0].id))).body.status === 'exited'))
    const again = await api(h.url, 'POST', path(), { command: 'sleep 120' })
    t.equal(again.status, 201, 'an exited process makes room')
    for (const x of [...sleepers.slice(1), again.body]) t.equal((await api(h.url, 'DELETE', path(x.id))).status, 204)
  })

  t.test("another tenant's processes are 404 on every route", async (t) => {
    const p = await startProcess(h.url, sid, { command: 'sleep 60' })
    const other = { key: OTHER_KEY }
    for (const [method, url, body] of [
      ['GET', path(), undefined],
      ['POST', path(), { command: 'echo intruder' }],
      ['GET', path(p.id), undefined],
      ['POST', `${path(p.id)}/signal`, { signal: 'KILL' }],
      ['DELETE', path(p.id), undefined],
    ] as const) {
      const r = await api(h.url, method, url, body, other)
      t.equal(r.status, 404, `${method} ${url}`)
      t.equal(r.body.code, 'session_not_found')
    }
    const out = await outputOf(h.url, sid, p.id, undefined, '', OTHER_KEY)
    t.equal(out.status, 404)
    await out.text()
    const stdin = await writeStdin(h.url, sid, p.id, 'x', false, OTHER_KEY)
    t.equal(stdin.status, 404)
    await stdin.text()
    // The other tenant's own session, naming this tenant's process.
    const theirs = await createSession(h.url, {}, OTHER_KEY)
    const cross = await api(h.url, 'GET', `/v1/sessions/${theirs}/processes/${p.id}`, undefined, other)
    t.equal(cross.status, 404)
    t.equal(cross.body.code, 'process_not_found')
    t.equal((await api(h.url, 'GET', path(p.id))).body.status, 'running', 'untouched')
    await api(h.url, 'DELETE', path(p.id))
    await api(h.url, 'DELETE', `/v1/sessions/${theirs}`, undefined, other)
  })

  t.test('a restart ends its processes (exit_code null) and leaves none in the sandbox', async (t) => {
    const p = await startProcess(h.url, sid, { command: 'echo up; sleep 3003' })
    await readOutput(h.url, sid, p.id, (e) => e.event === 'stdout')
    const follower = readOutput(h.url, sid, p.id)
    t.equal((await api(h.url, 'POST', `/v1/sessions/${sid}/restart`)).status, 200)
    const events = await follower
    t.equal(stdoutOf(events), 'up\n')
    t.match(exitOf(events), [{ data: { exit_code: null } }], 'a reader following it gets its exit')
    t.match((await api(h.url, 'GET', path(p.id))).body, { status: 'exited', exit_code: null })
    t.equal(await countInSandbox(h.url, sid, 'sleep 3003'), 0)
    const fresh = await startProcess(h.url, sid, { command: 'echo after restart' })
    t.equal(stdoutOf(await readOutput(h.url, sid, fresh.id)), 'after restart\n', 'the fresh sandbox runs processes')
  })

  t.test('deleting the session drops its processes', async (t) => {
    const doomed = await createSession(h.url)
    const p = await startProcess(h.url, doomed, { command: 'echo x; sleep 60' })
    await readOutput(h.url, doomed, p.id, (e) => e.event === 'stdout')
    const follower = await following(h.url, doomed, p.id)
    t.equal((await api(h.url, 'DELETE', `/v1/sessions/${doomed}`)).status, 204)
    t.match(exitOf(await follower.events), [{ data: { exit_code: null } }], 'a reader following one gets its exit')
    t.same(await h.redis.keys(`${h.prefix}{${doomed}}*`), [], 'no key of the session is left, its processes’ included')
  })
})
