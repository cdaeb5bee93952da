// The MCP server at /mcp, driven by the official SDK's own client over Streamable HTTP against a
// live server (real Docker and Redis): tools listed, state across calls, errors as tool results,
// output sent while the code runs, and the API keys enforced.
import t from 'tap'
import { LoggingMessageNotificationSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { API_KEY, OTHER_KEY, startApp } from './helpers/app.js'
import { api } from './helpers/client.js'
import { callTool, connectMcp, textOf } from './helpers/mcp.js'

const connect = connectMcp
const call = callTool

t.test('the MCP server', async (t) => {
  const h = await startApp(t)
  const client = await connect(h.url, API_KEY)
  t.teardown(() => client.close())

  t.test('lists its tools with descriptions and input schemas', async (t) => {
    const { tools } = await client.listTools()
    const byName = new Map(tools.map((tool) => [tool.name, tool]))
    t.same([...byName.keys()].sort(), [
      'create_session',
      'delete_file',
      'delete_session',
      'delete_snapshot',
      'execute',
      'fork_session',
      'hibernate_session',
      'interrupt',
      'list_files',
      'list_processes',
      'list_sessions',
      'list_snapshots',
      'read_file',
      'read_process_output',
      'run_bash',
      'run_python',
      'snapshot_session',
      'start_process',
      'stop_process',
      'wake_session',
      'write_file',
    ])
    const run = byName.get('run_python')!
    t.match(run.description, /persistent/)
    t.same(run.inputSchema.required, ['session_id', 'code'])
    t.match(run.inputSchema.properties, { code: { type: 'string' }, timeout_s: { type: 'number' }, session_id: { type: 'string' } })
    t.equal(byName.get('delete_session')!.annotations?.destructiveHint, true)
    const create = byName.get('create_session')!.inputSchema
    t.match(create.properties, { runtime: { anyOf: [{ const: 'runc' }, { const: 'runsc' }] }, limits: { properties: { memory_mb: { minimum: 32 } } } })
    t.notMatch(JSON.stringify(create), '$id', "the API's component ids are not carried into the tool schemas")
  })

  let sid = ''
  t.test('creates a session, runs code with state kept across calls, returns images', async (t) => {
    const created = await call(client, 'create_session', { idle_timeout_s: 120 })
    t.notOk(created.isError, textOf(created))
    sid = /ses_[A-Za-z0-9]{20}/.exec(textOf(created))?.[0] ?? ''
    t.ok(sid, 'the result names the session')

    const first = await call(client, 'run_python', { session_id: sid, code: 'x = 20\nprint("set", flush=True)\nx + 1' })
    t.notOk(first.isError)
    t.equal(textOf(first), 'set\n21\n')
    const second = await call(client, 'run_python', { session_id: sid, code: 'print(x * 2)' })
    t.equal(textOf(second), '40\n', 'x survives from the previous call')

    const plot = await call(client, 'run_python', { session_id: sid, code: 'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()' })
    const image = plot.content.find((c) => c.type === 'image')
    t.equal(image?.mimeType, 'image/png')
    t.equal(
      Buffer.from(image?.type === 'image' ? image.data : '', 'base64')
        .subarray(1, 4)
        .toString(),
      'PNG',
    )

    const listed = await call(client, 'list_sessions')
    t.match(textOf(listed), sid)
  })

  t.test('failing code is an error result with its traceback, not a protocol error', async (t) => {
    const r = await call(client, 'run_python', { session_id: sid, code: 'def f():\n    raise ValueError("boom")\nf()' })
    t.equal(r.isError, true)
    t.match(textOf(r), /Traceback[\s\S]*ValueError: boom/)
    t.match(textOf(r), /ended: error/)
    const after = await call(client, 'run_python', { session_id: sid, code: 'x' })
    t.equal(textOf(after), '20\n', 'the session still works after the error')
  })

  t.test('bad arguments and unknown sessions are error results naming the problem', async (t) => {
    const missing = await call(client, 'run_python', { session_id: 'ses_AAAAAAAAAAAAAAAAAAAA', code: '1' })
    t.equal(missing.isError, true)
    t.match(textOf(missing), /^session_not_found: /)
    const small = await call(client, 'create_session', { limits: { memory_mb: 1 } })
    t.equal(small.isError, true)
    t.match(textOf(small), /memory_mb/, 'the same limits as the HTTP API, from the same schema')
    const bad = await call(client, 'run_python', { session_id: sid, code: 7 })
    t.equal(bad.isError, true)
    t.match(textOf(bad), /code/)
    const other = await connect(h.url, OTHER_KEY)
    t.teardown(() => other.close())
    const foreign = await call(other, 'run_python', { session_id: sid, code: 'x' })
    t.match(textOf(foreign), /^session_not_found: /, 'another tenant cannot use the session')
  })

  t.test('output of slow code arrives as progress before the result', async (t) => {
    const seen: Array<{ what: string; at: number }> = []
    const code = 'import time\nprint("first", flush=True)\ntime.sleep(1.5)\nprint("second", flush=True)'
    const result = (await client.callTool({ name: 'run_python', arguments: { session_id: sid, code } }, undefined, {
      onprogress: (p) => seen.push({ what: `progress:${p.message ?? ''}`, at: performance.now() }),
    })) as CallToolResult
    seen.push({ what: 'result', at: performance.now() })
    t.equal(textOf(result), 'first\nsecond\n')
    const whats = seen.map((s) => s.what)
    t.same(whats, ['progress:first\n', 'progress:second\n', 'result'], 'each output as progress, in order, then the result')
    t.ok(seen[1]!.at - seen[0]!.at >= 1000, `the first line came while the code slept (${Math.round(seen[1]!.at - seen[0]!.at)} ms before the second)`)
  })

  t.test('without a progress token, output arrives as log messages before the result', async (t) => {
    const seen: string[] = []
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
      seen.push(`log:${n.params.level}:${String(n.params.data)}`)
    })
    const r = await call(client, 'run_python', {
      session_id: sid,
      code: 'import sys, time\nprint("out", flush=True)\ntime.sleep(0.5)\nprint("err", file=sys.stderr)',
    })
    seen.push('result')
    t.equal(textOf(r), 'out\nerr\n')
    t.same(seen, ['log:info:out\n', 'log:warning:err\n', 'result'])
  })

  t.test('interrupt stops running code; the run_python call returns with the KeyboardInterrupt', async (t) => {
    let started!: () => void
    const running = new Promise<void>((r) => (started = r))
    const pending = client.callTool(
      { name: 'run_python', arguments: { session_id: sid, code: 'import time\nprint("go", flush=True)\ntime.sleep(60)' } },
      undefined,
      {
        onprogress: () => started(),
      },
    ) as Promise<CallToolResult>
    await running
    const other = await connect(h.url, API_KEY)
    t.teardown(() => other.close())
    const sent = await call(other, 'interrupt', { session_id: sid })
    t.notOk(sent.isError, textOf(sent))
    const r = await pending
    t.equal(r.isError, true)
    t.match(textOf(r), /KeyboardInterrupt[\s\S]*ended: interrupted/)
  })

  t.test('delete_session removes it', async (t) => {
    const r = await call(client, 'delete_session', { session_id: sid })
    t.notOk(r.isError)
    t.equal((await api(h.url, 'GET', `/v1/sessions/${sid}`)).status, 404)
  })
})

t.test('/mcp refuses requests without a valid key, as problem+json', async (t) => {
  const h = await startApp(t)
  for (const key of [null, 'not-a-key']) {
    await t.rejects(connect(h.url, key), /401/, `key ${String(key)}: the SDK client cannot connect`)
  }
  const res = await fetch(`${h.url}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
  })
  t.equal(res.status, 401)
  t.match(res.headers.get('content-type'), /application\/problem\+json/)
  t.equal(((await res.json()) as { code: string }).code, 'unauthorized')
  const get = await api(h.url, 'GET', '/mcp', undefined, { headers: { accept: 'text/event-stream' } })
  t.equal(get.status, 405, 'a stateless server offers no server-to-client stream')
})
