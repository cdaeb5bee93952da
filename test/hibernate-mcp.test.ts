// The MCP tools hibernate_session and wake_session on the real engine with runsc: a variable set
// before is there after, a run_python call wakes a hibernated session by itself, and the refusals
// (runc, another tenant's session) come back as error results with their codes.
import t from 'tap'
import { API_KEY, OTHER_KEY } from './helpers/app.js'
import { api } from './helpers/client.js'
import { startHibernationApp } from './helpers/hibernation.js'
import { callTool, connectMcp, textOf } from './helpers/mcp.js'

t.test('MCP: hibernate_session, wake_session, run_python wakes it', async (t) => {
  const h = await startHibernationApp(t)
  const client = await connectMcp(h.url, API_KEY)
  t.teardown(() => client.close())

  const created = await callTool(client, 'create_session', { runtime: 'runsc', idle_action: 'hibernate', hibernated_ttl_s: 300 })
  t.notOk(created.isError, textOf(created))
  const sid = /Session (ses_\w+) is ready/.exec(textOf(created))![1]!
  t.match(textOf(created), /"idle_action": "hibernate"[\s\S]*"hibernated_ttl_s": 300/, 'create_session passes idle_action and hibernated_ttl_s')
  t.equal(textOf(await callTool(client, 'run_python', { session_id: sid, code: "notes = ['before']\nprint(len(notes))" })), '1\n')

  const slept = await callTool(client, 'hibernate_session', { session_id: sid })
  t.notOk(slept.isError, textOf(slept))
  t.match(textOf(slept), new RegExp(`^Session ${sid} is hibernated\\.\\n[\\s\\S]*"status": "hibernated"[\\s\\S]*"hibernated_at": "\\d{4}-`))
  t.equal((await api(h.url, 'GET', `/v1/sessions/${sid}`)).body.status, 'hibernated', 'the session is hibernated')
  t.match(textOf(await callTool(client, 'list_sessions')), new RegExp(`"id": "${sid}",\\s*"status": "hibernated"`), 'list_sessions shows it')

  const woke = await callTool(client, 'wake_session', { session_id: sid })
  t.notOk(woke.isError, textOf(woke))
  t.match(textOf(woke), new RegExp(`^Session ${sid} is ready\\.`))
  t.equal(
    textOf(await callTool(client, 'run_python', { session_id: sid, code: "notes.append('after wake')\nprint(notes)" })),
    "['before', 'after wake']\n",
    'state kept across wake_session',
  )

  t.notOk((await callTool(client, 'hibernate_session', { session_id: sid })).isError)
  const ran = await callTool(client, 'run_python', { session_id: sid, code: "notes.append('after use')\nprint(notes)" })
  t.notOk(ran.isError, textOf(ran))
  t.equal(textOf(ran), "['before', 'after wake', 'after use']\n", 'run_python woke it, state kept')

  const runc = /Session (ses_\w+) is ready/.exec(textOf(await callTool(client, 'create_session', { runtime: 'runc' })))![1]!
  const refused = await callTool(client, 'hibernate_session', { session_id: runc })
  t.ok(refused.isError)
  t.match(textOf(refused), /^not_supported: /, 'a runc session: not_supported, as a result the model can read')

  const other = await connectMcp(h.url, OTHER_KEY)
  t.teardown(() => other.close())
  for (const name of ['hibernate_session', 'wake_session']) {
    const foreign = await callTool(other, name, { session_id: sid })
    t.ok(foreign.isError)
    t.match(textOf(foreign), /^session_not_found/, `${name}: another tenant's session is not found`)
  }
})
