// Replicas behind a plain balancer, for MCP and for creates: an MCP client connected to the
// instance that does NOT hold its session must be served as the holder serves it (POST /mcp names
// the session in its JSON-RPC body, not its path), and a request racing a session's create through
// another instance must be answered by the creator, leaving the session alive.
import t from 'tap'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { API_KEY, containersOf } from './helpers/app.js'
import { api, createSession, stdoutText } from './helpers/client.js'
import { connectMcp, textOf } from './helpers/mcp.js'
import { startReplicas } from './helpers/replicas.js'
import { waitFor } from './helpers/wait.js'

const auth = { authorization: `Bearer ${API_KEY}` }

const connect = (url: string) => connectMcp(url, API_KEY)

t.test('MCP tool calls through the instance that does not hold the session', async (t) => {
  const r = await startReplicas(t, 2)
  const [a, b] = r.servers.map((s) => s.url) as [string, string]
  const sid = await createSession(a)
  t.equal(await r.holderOf(sid), 0, 'the instance that created the session holds it')
  const client = await connect(b)
  t.teardown(() => client.close())
  const call = async (name: string, args: Record<string, unknown>) => (await client.callTool({ name, arguments: args })) as CallToolResult

  const first = await call('run_python', { session_id: sid, code: 'x = 20\nx + 1' })
  t.notOk(first.isError, `run_python through the other instance: ${textOf(first)}`)
  t.equal(textOf(first), '21\n')
  const second = await call('run_python', { session_id: sid, code: 'print(x * 2)' })
  t.equal(textOf(second), '40\n', 'state kept across calls')

  // Output arrives as progress while the code sleeps, before the result: the holder's SSE answer passes through as it is.
  const seen: Array<{ what: string; at: number }> = []
  const slow = (await client.callTool(
    { name: 'run_python', arguments: { session_id: sid, code: 'import time\nprint("first", flush=True)\ntime.sleep(1.5)\nprint("second", flush=True)' } },
    undefined,
    { onprogress: (p) => seen.push({ what: `progress:${p.message ?? ''}`, at: performance.now() }) },
  )) as CallToolResult
  seen.push({ what: 'result', at: performance.now() })
  t.equal(textOf(slow), 'first\nsecond\n')
  t.same(
    seen.map((s) => s.what),
    ['progress:first\n', 'progress:second\n', 'result'],
    'progress in order, then the result',
  )
  t.ok(seen[1]!.at - seen[0]!.at >= 1000, `the first line came while the code slept (${Math.round(seen[1]!.at - seen[0]!.at)} ms before the second)`)

  const bash = await call('run_bash', { session_id: sid, code: 'echo "hi from $(basename "$PWD")"' })
  t.notOk(bash.isError, textOf(bash))
  t.match(textOf(bash), /^hi from workspace\n[\s\S]*\[exit code 0\]/)

  const wrote = await call('write_file', { session_id: sid, path: 'notes/a.txt', content: 'hello\n' })
  t.notOk(wrote.isError, textOf(wrote))
  const read = await call('read_file', { session_id: sid, path: 'notes/a.txt' })
  t.equal(textOf(read), 'hello\n', 'read_file gives back what write_file wrote')
  const listed = await call('list_files', { session_id: sid, path: 'notes' })
  t.match(textOf(listed), /notes\/a\.txt/)

  // A raw JSON-RPC batch of two calls to the session, through the other instance.
  const batch = await fetch(`${b}/mcp`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify([
      { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'run_python', arguments: { session_id: sid, code: 'x + 1' } } },
      { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'read_file', arguments: { session_id: sid, path: 'notes/a.txt' } } },
    ]),
  })
  t.equal(batch.status, 200)
  t.match(batch.headers.get('content-type'), /^text\/event-stream/, 'the SSE answer passes through')
  const answers = (await batch.text())
    .split('\n')
    .filter((l) => l.startsWith('data: '))
    .map((l) => JSON.parse(l.slice(6)) as { id?: number; result: CallToolResult })
    .filter((m): m is { id: number; result: CallToolResult } => m.id !== undefined) // not the output's log notifications
    .sort((p, q) => p.id - q.id)
  t.same(
    answers.map((m) => [m.id, m.result.isError ?? false, textOf(m.result)]),
    [
      [1, false, '21\n'],
      [2, false, 'hello\n'],
    ],
    'both calls of the batch answered by the holder',
  )

  t.equal(await r.holderOf(sid), 0, 'the session never moved')
  const deleted = await call('delete_session', { session_id: sid })
  t.notOk(deleted.isError, textOf(deleted))
  t.equal((await api(a, 'GET', `/v1/sessions/${sid}`)).status, 404)
  t.ok(await waitFor(async () => (await containersOf(r.deployment)).length === 0, 30_000), 'no container left')
})

t.test('a request through another instance while the session is being created is answered by the creator', async (t) => {
  const r = await startReplicas(t, 2)
  const [a, b] = r.servers.map((s) => s.url) as [string, string]
  const index = `${r.prefix}tenant:alpha:sessions`
  for (let round = 0; round < 2; round++) {
    const before = new Set(await r.redis.smembers(index))
    let createdAt = Infinity
    const creating = api(a, 'POST', '/v1/sessions', {}).finally(() => (createdAt = performance.now()))
    // The create's answer names the id only at its end: the session index has it as soon as the record is written.
    let sid = ''
    t.ok(
      await waitFor(
        async () => {
          sid = (await r.redis.smembers(index)).find((id) => !before.has(id)) ?? ''
          return sid !== ''
        },
        20000,
        2,
      ),
      'the new session is in the index',
    )
    const sentAt = performance.now()
    const raced = await api(b, 'POST', `/v1/sessions/${sid}/executions`, { code: 'print("raced")' })
    const created = await creating
    t.ok(sentAt < createdAt, 'the execute was sent while the create was under way')
    t.equal(created.status, 201, 'the create succeeds')
    t.equal(created.body.id, sid)
    t.equal(raced.status, 200, `the racing execute is answered: ${JSON.stringify(raced.body)}`)
    t.equal(stdoutText(raced.body.events), 'raced\n')
    t.equal(await r.holderOf(sid), 0, 'the creator holds the session')
    const after = await api(b, 'POST', `/v1/sessions/${sid}/executions`, { code: 'print("alive")' })
    t.equal(stdoutText(after.body.events), 'alive\n', 'the session is still alive')
    t.equal((await api(b, 'GET', `/v1/sessions/${sid}`)).body.status, 'ready')
    t.equal((await api(b, 'DELETE', `/v1/sessions/${sid}`)).status, 204)
  }
  t.ok(await waitFor(async () => (await containersOf(r.deployment)).length === 0, 30_000), 'no container left')
})
