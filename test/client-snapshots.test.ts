// Snapshots and fork from the TypeScript client, the CLI (`replcast snapshot`, `fork`) and MCP
// (snapshot_session, list_snapshots, delete_snapshot, fork_session, create_session {snapshot_id}) on
// the real engine with runsc: each copy holds the state taken, and a change in one is seen by no other.
import t from 'tap'
import { NotFoundError, ReplcastClient, type Execution } from '../clients/typescript/src/index.ts'
import { API_KEY, OTHER_KEY } from './helpers/app.js'
import { runCli } from './helpers/cli.js'
import { stdoutText } from './helpers/client.js'
import { startHibernationApp } from './helpers/hibernation.js'
import { callTool, connectMcp, textOf } from './helpers/mcp.js'

/** An execution's stdout, joined. */
const stdout = (ex: Execution) => stdoutText(ex.events)

t.test('snapshots and fork from the client, the CLI and MCP', async (t) => {
  const h = await startHibernationApp(t)
  const client = new ReplcastClient({ url: h.url, apiKey: API_KEY })

  t.test('client: snapshot, a session from it, list, get, delete; fork copies are independent', async (t) => {
    const s = await client.createSession({ runtime: 'runsc' })
    t.equal(stdout(await client.execute(s.id, "v = 'taken'\nopen('/workspace/f.txt', 'w').write('file')\nprint('set')")), 'set\n')
    const snap = await client.snapshot(s.id, { name: 'before' })
    t.match(snap, { session_id: s.id, name: 'before', runtime: 'runsc' })
    t.ok(snap.id.startsWith('snp_') && snap.bytes > 0, 'an id and its size')
    t.equal(stdout(await client.execute(s.id, "v = 'changed after'\nprint(v)")), 'changed after\n', 'the session runs on')

    const from = await client.createSession({ snapshot_id: snap.id })
    t.not(from.id, s.id)
    t.equal(stdout(await client.execute(from.id, "print(v, open('/workspace/f.txt').read())")), 'taken file\n', 'a session from the snapshot has its state')
    t.same((await client.getSnapshot(snap.id)).id, snap.id)
    const listed = []
    for await (const x of client.allSnapshots()) listed.push(x.id)
    t.ok(listed.includes(snap.id), 'allSnapshots lists it')

    const copies = await client.fork(s.id, { count: 2 })
    t.equal(copies.length, 2)
    await client.execute(copies[0]!.id, "v = 'copy 0'")
    const seen = await Promise.all([s.id, copies[0]!.id, copies[1]!.id].map(async (id) => stdout(await client.execute(id, 'print(v)'))))
    t.same(seen, ['changed after\n', 'copy 0\n', 'changed after\n'], 'each copy starts from the state then; a change in one is seen by no other')

    await client.deleteSnapshot(snap.id)
    const gone = await client.getSnapshot(snap.id).catch((e: unknown) => e)
    t.ok(gone instanceof NotFoundError && gone.is('snapshot_not_found'), 'deleted: NotFoundError snapshot_not_found')
    const other = await new ReplcastClient({ url: h.url, apiKey: OTHER_KEY }).fork(s.id).catch((e: unknown) => e)
    t.ok(other instanceof NotFoundError && other.is('session_not_found'), "another tenant's session cannot be forked")
  })

  t.test('CLI: replcast snapshot, snapshot ls, snapshot restore, fork -n, snapshot rm', async (t) => {
    const sid = (await client.createSession({ runtime: 'runsc' })).id
    await runCli(h.url, ['run', '--session', sid, '-c', 'w = 7'])
    const taken = await runCli(h.url, ['snapshot', sid, '--name', 'cli'])
    t.equal(taken.code, 0, taken.err)
    const snapId = taken.out.trim()
    t.match(snapId, /^snp_\w{20}$/, 'prints the snapshot id')
    t.match((await runCli(h.url, ['snapshot', 'ls'])).out, new RegExp(`${snapId}\\s+${sid}\\s+cli\\s+\\d+`))
    const restored = await runCli(h.url, ['snapshot', 'restore', snapId])
    t.equal(restored.code, 0, restored.err)
    t.equal((await runCli(h.url, ['run', '--session', restored.out.trim(), '-c', 'print(w * 6)'])).out, '42\n', 'the restored session has the state')
    const forked = await runCli(h.url, ['fork', sid, '-n', '2'])
    t.equal(forked.code, 0, forked.err)
    const ids = forked.out.trim().split('\n')
    t.equal(ids.length, 2)
    for (const id of ids) t.equal((await runCli(h.url, ['run', '--session', id, '-c', 'print(w)'])).out, '7\n', `fork ${id} has the state`)
    t.equal((await runCli(h.url, ['fork', sid, '-n', '17'])).code, 2, 'a count above 16 is a usage error')
    t.equal((await runCli(h.url, ['snapshot', 'rm', snapId])).out, `deleted ${snapId}\n`)
    const again = await runCli(h.url, ['snapshot', 'rm', snapId])
    t.equal(again.code, 3)
    t.match(again.err, /snapshot_not_found/)
  })

  t.test('MCP: snapshot_session, create_session from it, fork_session, list and delete', async (t) => {
    const mcp = await connectMcp(h.url, API_KEY)
    t.teardown(() => mcp.close())
    const sid = /Session (ses_\w+) is ready/.exec(textOf(await callTool(mcp, 'create_session', { runtime: 'runsc' })))![1]!
    await callTool(mcp, 'run_python', { session_id: sid, code: "plan = ['a']" })
    const snapped = await callTool(mcp, 'snapshot_session', { session_id: sid, name: 'mcp' })
    t.notOk(snapped.isError, textOf(snapped))
    const snapId = /Snapshot (snp_\w+) taken/.exec(textOf(snapped))![1]!
    const from = await callTool(mcp, 'create_session', { snapshot_id: snapId })
    t.notOk(from.isError, textOf(from))
    const fromId = /Session (ses_\w+) is ready/.exec(textOf(from))![1]!
    t.equal(textOf(await callTool(mcp, 'run_python', { session_id: fromId, code: "plan.append('from snapshot')\nprint(plan)" })), "['a', 'from snapshot']\n")
    const forked = await callTool(mcp, 'fork_session', { session_id: sid, count: 2 })
    t.notOk(forked.isError, textOf(forked))
    const copies = [
      ...textOf(forked)
        .split('\n')[0]!
        .matchAll(/ses_\w{20}/g),
    ].map((m) => m[0])
    t.equal(copies.length, 2, 'two new sessions named')
    t.equal(textOf(await callTool(mcp, 'run_python', { session_id: copies[1]!, code: 'print(plan)' })), "['a']\n", 'a fork has the parent state')
    t.match(textOf(await callTool(mcp, 'list_snapshots')), new RegExp(`"id": "${snapId}"`))
    t.notOk((await callTool(mcp, 'delete_snapshot', { snapshot_id: snapId })).isError)
    t.match(textOf(await callTool(mcp, 'delete_snapshot', { snapshot_id: snapId })), /^snapshot_not_found/)
  })
})
