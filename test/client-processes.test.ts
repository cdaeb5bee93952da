// Background processes from the TypeScript client (start, list, output as a resumable stream, stdin,
// signals, delete, typed errors) and from the CLI as a user runs it: `replcast start`, `ps`,
// `logs [-f] PID` (the session found from the process id) and `kill [-s SIGNAL] [--rm]`.
import t from 'tap'
import { ConflictError, NotFoundError, ReplcastClient, type ExecutionEvent } from '../clients/typescript/src/index.ts'
import { API_KEY, startApp } from './helpers/app.js'
import { runCli } from './helpers/cli.js'
import { createSession } from './helpers/client.js'

const textOf = (events: ExecutionEvent[], type = 'stdout') =>
  events
    .filter((e) => e.type === type)
    .map((e) => e.text)
    .join('')

t.test('the client and the CLI drive background processes', async (t) => {
  const h = await startApp(t)
  const client = new ReplcastClient({ url: h.url, apiKey: API_KEY })
  const sid = await createSession(h.url)

  t.test('client: start, stdin with eof, output resumed after any event, exit', async (t) => {
    const p = await client.startProcess(sid, { command: 'while read -r l; do echo "got $l"; done; echo end >&2; exit 5' })
    t.equal(p.status, 'running')
    await client.writeStdin(sid, p.id, 'a\nb\n')
    await client.writeStdin(sid, p.id, new TextEncoder().encode('c\n'), { eof: true })
    const events: ExecutionEvent[] = []
    for await (const e of client.processOutput(sid, p.id)) events.push(e)
    t.equal(textOf(events), 'got a\ngot b\ngot c\n')
    t.equal(textOf(events, 'stderr'), 'end\n')
    t.match(events.at(-1), { type: 'exit', exit_code: 5 }, 'the stream ends with the exit')
    const rest: ExecutionEvent[] = []
    for await (const e of client.processOutput(sid, p.id, { lastEventId: events[0]!.id })) rest.push(e)
    t.same(
      rest.map((e) => e.id),
      events.slice(1).map((e) => e.id),
      'resumed after the first event: the rest, once',
    )
    t.match(await client.getProcess(sid, p.id), { status: 'exited', exit_code: 5 })
    t.ok((await client.listProcesses(sid)).some((x) => x.id === p.id))
    const late = await client.writeStdin(sid, p.id, 'x').catch((err: unknown) => err)
    t.ok(late instanceof ConflictError && late.is('process_exited'), 'stdin to an exited process: ConflictError process_exited')
    await client.deleteProcess(sid, p.id)
    const gone = await client.getProcess(sid, p.id).catch((err: unknown) => err)
    t.ok(gone instanceof NotFoundError && gone.is('process_not_found'))
  })

  t.test('client: a signal reaches a trap', async (t) => {
    const p = await client.startProcess(sid, { command: "trap 'echo hup; exit 1' HUP; echo ready; while :; do sleep 0.1; done" })
    const events: ExecutionEvent[] = []
    for await (const e of client.processOutput(sid, p.id)) {
      events.push(e)
      if (e.type === 'stdout' && e.text === 'ready\n') await client.signalProcess(sid, p.id, 'HUP')
    }
    t.equal(textOf(events), 'ready\nhup\n')
    t.match(events.at(-1), { type: 'exit', exit_code: 1 })
  })

  t.test('CLI: start, ps, logs and logs -f by process id alone, kill, kill --rm', async (t) => {
    const started = await runCli(h.url, ['start', sid, 'echo first; read -t 30 x; echo "then $x"; exit 7'])
    t.equal(started.code, 0, started.err)
    const pid = started.out.trim()
    t.match(pid, /^prc_\w{20}$/, 'start prints the process id')
    const ps = await runCli(h.url, ['ps'])
    t.equal(ps.code, 0, ps.err)
    t.match(ps.out, /^ID\s+SESSION\s+STATUS\s+STARTED\s+COMMAND\n/)
    t.match(ps.out, new RegExp(`${pid}\\s+${sid}\\s+running\\s+\\S+\\s+echo first`))
    const json = JSON.parse((await runCli(h.url, ['ps', sid, '--json'])).out)
    t.ok(json.some((p: { id: string }) => p.id === pid))
    const sofar = await runCli(h.url, ['logs', pid])
    t.equal(sofar.code, 0)
    t.equal(sofar.out, 'first\n', 'logs: what it printed so far, then it returns')
    const following = runCli(h.url, ['logs', '-f', sid, pid])
    await client.writeStdin(sid, pid, 'more\n')
    const followed = await following
    t.equal(followed.out, 'first\nthen more\n')
    t.equal(followed.code, 7, "logs -f exits with the process's exit code")

    const sleeper = (await runCli(h.url, ['start', sid, "trap 'echo bye; exit 0' TERM; while :; do sleep 0.1; done"])).out.trim()
    const killed = await runCli(h.url, ['kill', sleeper])
    t.equal(killed.code, 0, killed.err)
    t.equal(killed.out, `sent TERM to ${sleeper}\n`)
    const after = await runCli(h.url, ['logs', '-f', sleeper])
    t.equal(after.out, 'bye\n')
    t.equal(after.code, 0)
    const removed = await runCli(h.url, ['kill', '--rm', sid, sleeper])
    t.equal(removed.out, `removed ${sleeper}\n`)
    const unknown = await runCli(h.url, ['logs', sleeper])
    t.equal(unknown.code, 2)
    t.match(unknown.err, /no process prc_\w+ in any of your sessions/)
    const bad = await runCli(h.url, ['kill', '-s', 'BOGUS', pid])
    t.equal(bad.code, 3, 'a signal the API does not know: an API error')
    t.match(bad.err, /validation_failed/)
  })
})
