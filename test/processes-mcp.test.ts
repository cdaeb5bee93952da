// The MCP tools for background processes: start one, read its output by cursor (waiting for more),
// stop it with a signal, list them; another tenant's process is not found.
import t from 'tap'
import { API_KEY, OTHER_KEY, startApp } from './helpers/app.js'
import { createSession } from './helpers/client.js'
import { callTool, connectMcp, textOf } from './helpers/mcp.js'

t.test('MCP: start_process, read_process_output, stop_process, list_processes', async (t) => {
  const h = await startApp(t)
  const client = await connectMcp(h.url, API_KEY)
  t.teardown(() => client.close())
  const sid = await createSession(h.url)

  const started = await callTool(client, 'start_process', {
    session_id: sid,
    command: "trap 'echo stopping; exit 0' TERM; for i in 1 2 3; do echo tick $i; done; while :; do sleep 0.1; done",
  })
  t.notOk(started.isError, textOf(started))
  const pid = /Process (prc_\w+) is running/.exec(textOf(started))?.[1]
  t.ok(pid, 'the result names the process')

  const first = textOf(await callTool(client, 'read_process_output', { session_id: sid, process_id: pid, wait_s: 10 }))
  t.match(first, /^tick 1\n/, 'its output from the start')
  t.match(first, /\[running\] cursor: \d+-\d+$/)
  let text = first
  let cursor = /cursor: (\S+)$/.exec(first)![1]
  while (!text.includes('tick 3')) {
    const more = textOf(await callTool(client, 'read_process_output', { session_id: sid, process_id: pid, cursor, wait_s: 10 }))
    text += more
    cursor = /cursor: (\S+)$/.exec(more)![1]
  }
  const idle = textOf(await callTool(client, 'read_process_output', { session_id: sid, process_id: pid, cursor, wait_s: 0.3 }))
  t.match(idle, /^\(no new output\)\n\[running\] cursor: /, 'nothing new: says so, with the same cursor')
  t.match(textOf(await callTool(client, 'list_processes', { session_id: sid })), new RegExp(`"id": "${pid}"[\\s\\S]*"status": "running"`))

  const stopped = await callTool(client, 'stop_process', { session_id: sid, process_id: pid })
  t.notOk(stopped.isError, textOf(stopped))
  const end = textOf(await callTool(client, 'read_process_output', { session_id: sid, process_id: pid, cursor, wait_s: 10 }))
  // TERM reaches the whole group: bash may also report its `sleep` child killed ("Terminated", on stderr).
  t.match(end.replace(/^Terminated\n/m, ''), /stopping\n\[exited with code 0\] cursor: /, 'the trap ran and the exit is reported')

  const other = await connectMcp(h.url, OTHER_KEY)
  t.teardown(() => other.close())
  const foreign = await callTool(other, 'read_process_output', { session_id: sid, process_id: pid })
  t.ok(foreign.isError)
  t.match(textOf(foreign), /^session_not_found/)
})
