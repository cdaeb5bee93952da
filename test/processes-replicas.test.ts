// A background process's output outlives the API instance that drives it: after a hard kill of the
// API, the restarted instance replays what the process wrote meanwhile from the REPL's buffer (every
// line once, its exit too), and a second instance reads it, live, and passes stdin, signals and
// deletes to the holder.
import t from 'tap'
import { API_KEY } from './helpers/app.js'
import { api, readSse, stdoutOf } from './helpers/client.js'
import { outputOf, readOutput, stderrOf, writeStdin } from './helpers/processes.js'
import { startReplicas } from './helpers/replicas.js'
import { isolatedServer, killHard } from './helpers/server-process.js'

const LINES = 40
const expected = Array.from({ length: LINES }, (_, i) => `line ${i + 1}\n`).join('')

t.test('after a hard kill of the API, the restarted instance has every line once and the exits', async (t) => {
  const s = await isolatedServer(t, 'processes-restart', { SANDBOX_POOL_SIZE: '0' })
  const base = () => s.server.url
  const sid = (await api(base(), 'POST', '/v1/sessions', {})).body.id
  const counting = (await api(base(), 'POST', `/v1/sessions/${sid}/processes`, { command: `for i in $(seq 1 ${LINES}); do echo "line $i"; sleep 0.1; done` }))
    .body
  const ending = (await api(base(), 'POST', `/v1/sessions/${sid}/processes`, { command: 'read -t 60 x; echo "finished $x"; exit 9' })).body
  let seen = 0
  const before = await readSse(await outputOf(base(), sid, counting.id), (e) => e.event === 'stdout' && ++seen === 5)
  await killHard(s.server)
  // While no API is attached: the counter goes on, and the other process gets no stdin (it times out or gets it below).
  await s.respawn()
  t.equal((await writeStdin(base(), sid, ending.id, 'late\n')).status, 204, 'the re-adopted process takes stdin')
  const after = await readSse(await outputOf(base(), sid, counting.id, before.at(-1)!.id))
  const all = [...before, ...after]
  t.equal(stdoutOf(all), expected, 'every line, in order, none twice')
  t.equal(new Set(all.map((e) => e.id)).size, all.length, 'no event twice')
  t.same(
    all.filter((e) => e.event === 'limit'),
    [],
    'nothing was lost while detached',
  )
  t.match(all.at(-1), { event: 'exit', data: { exit_code: 0 } })
  const fromStart = await readOutput(base(), sid, counting.id)
  t.same(
    fromStart.map((e) => e.id),
    all.map((e) => e.id),
    'read again from the start: the same events',
  )
  const endingEvents = await readOutput(base(), sid, ending.id)
  t.equal(stdoutOf(endingEvents), 'finished late\n')
  t.match(endingEvents.at(-1), { event: 'exit', data: { exit_code: 9 } })
})

t.test('an exit while no API was attached is recorded after the restart', async (t) => {
  const s = await isolatedServer(t, 'processes-exit-detached', { SANDBOX_POOL_SIZE: '0' })
  const sid = (await api(s.server.url, 'POST', '/v1/sessions', {})).body.id
  const p = (
    await api(s.server.url, 'POST', `/v1/sessions/${sid}/processes`, {
      command: 'while ! [ -e go ]; do sleep 0.05; done; echo gone-while-detached >&2; exit 4',
    })
  ).body
  await killHard(s.server)
  // The file is written by another process in the sandbox, not by the API: the process ends while no API is there.
  const docker = await import('dockerode')
  const [c] = await new docker.default().listContainers({ filters: { label: [`replcast.session=${sid}`] } })
  const exec = await new docker.default().getContainer(c!.Id).exec({ Cmd: ['touch', '/workspace/go'], User: '1000:1000' })
  await exec.start({ Detach: false }).then((stream) => new Promise((r) => (stream.on('end', r), stream.resume())))
  await s.respawn()
  const events = await readOutput(s.server.url, sid, p.id)
  t.equal(stderrOf(events), 'gone-while-detached\n')
  t.match(events.at(-1), { event: 'exit', data: { exit_code: 4 } })
  t.match((await api(s.server.url, 'GET', `/v1/sessions/${sid}/processes/${p.id}`)).body, { status: 'exited', exit_code: 4 })
})

t.test('through any instance: a second one reads the output live and passes stdin, signals and deletes to the holder', async (t) => {
  const r = await startReplicas(t, 2, { SANDBOX_POOL_SIZE: '0' })
  const sid = (await api(r.servers[0]!.url, 'POST', '/v1/sessions', {})).body.id
  const holder = await r.holderOf(sid)
  const there = r.servers[holder]!.url
  const elsewhere = r.servers[1 - holder]!.url
  const started = await api(elsewhere, 'POST', `/v1/sessions/${sid}/processes`, {
    command: 'trap \'echo term; exit 15\' TERM; while IFS= read -r l; do echo "echo $l"; done; echo closed; sleep 60',
  })
  t.equal(started.status, 201, 'started through the other instance')
  const pid = started.body.id
  const reading = readSse(await outputOf(elsewhere, sid, pid), (e) => e.event === 'exit')
  t.equal((await writeStdin(elsewhere, sid, pid, 'a\nb\n', true)).status, 204, 'stdin through the other instance')
  const listed = await api(elsewhere, 'GET', `/v1/sessions/${sid}/processes`)
  t.same(
    listed.body.processes.map((x: any) => x.id),
    [pid],
  )
  const live = await readSse(await outputOf(there, sid, pid), (e) => e.event === 'stdout' && stdoutOf([e]).includes('closed'))
  t.equal(stdoutOf(live), 'echo a\necho b\nclosed\n', 'the holder has it too')
  t.equal((await api(elsewhere, 'POST', `/v1/sessions/${sid}/processes/${pid}/signal`, { signal: 'TERM' })).status, 204, 'a signal through the other instance')
  const events = await reading
  t.equal(stdoutOf(events), 'echo a\necho b\nclosed\nterm\n', 'the other instance followed it live to its exit')
  t.match(events.at(-1), { event: 'exit', data: { exit_code: 15 } }, 'TERM reached the group: the sleep ended, then the trap ran')
  const second = await api(there, 'POST', `/v1/sessions/${sid}/processes`, { command: 'sleep 600' })
  t.equal((await api(elsewhere, 'DELETE', `/v1/sessions/${sid}/processes/${second.body.id}`)).status, 204, 'deleted through the other instance')
  t.equal((await api(there, 'GET', `/v1/sessions/${sid}/processes/${second.body.id}`)).status, 404)
  t.equal((await fetch(`${elsewhere}/v1/sessions/${sid}/processes`, { headers: { authorization: `Bearer ${API_KEY}` } })).status, 200)
})
