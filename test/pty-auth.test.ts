// Who may open a session's terminal, and where: an upgrade without a valid key or token is refused
// with 401 before anything starts; another tenant's session answers 404 as a missing one does; a
// browser's token (POST .../pty-token) opens that session's terminal only, and an execution's events
// token opens none; a plain GET is 426; an instance that does not hold the session passes the
// upgrade on to the holder, and the terminal works through it.
import t from 'tap'
import { NotFoundError, ReplcastClient } from '../clients/typescript/src/index.ts'
import { API_KEY, OTHER_KEY, startApp } from './helpers/app.js'
import { api, createSession } from './helpers/client.js'
import { closePty, openPty, refusedPty, shellOutput } from './helpers/pty.js'
import { waitFor } from './helpers/wait.js'

t.test('terminal access', async (t) => {
  const h = await startApp(t)
  const sid = await createSession(h.url)
  const other = await createSession(h.url, {}, OTHER_KEY)

  t.test('an upgrade without a valid key or token is refused with 401', async (t) => {
    for (const opts of [{ key: '' }, { key: 'not-a-key' }, { token: 'forged.token' }]) {
      const r = await refusedPty(h.url, sid, opts)
      t.equal(r.status, 401, JSON.stringify(opts))
      t.equal(r.body?.code, 'unauthorized')
    }
  })

  t.test("another tenant's session answers 404, as a missing one does", async (t) => {
    for (const target of [other, 'ses_AAAAAAAAAAAAAAAAAAAA']) {
      const r = await refusedPty(h.url, target)
      t.equal(r.status, 404, target)
      t.equal(r.body?.code, 'session_not_found')
    }
    const token = await api(h.url, 'POST', `/v1/sessions/${other}/pty-token`)
    t.equal(token.status, 404, "no token for another tenant's session")
  })

  t.test("a token opens that session's terminal only; an events token opens none", async (t) => {
    const minted = await api(h.url, 'POST', `/v1/sessions/${sid}/pty-token`)
    t.equal(minted.status, 201)
    t.ok(Date.parse(minted.body.expires_at) > Date.now())
    const p = await openPty(h.url, sid, { token: minted.body.token })
    t.equal(await shellOutput(p, 'echo via-token'), 'via-token')
    await closePty(p)
    const mine2 = await createSession(h.url)
    t.equal((await refusedPty(h.url, mine2, { token: minted.body.token })).status, 401, "not another session's, even the same tenant's")
    const ex = await api(h.url, 'POST', `/v1/sessions/${sid}/executions`, { code: '1' })
    const eid = ex.headers.get('location')!.split('/').pop()!
    const events = await api(h.url, 'POST', `/v1/sessions/${sid}/executions/${eid}/events-token`)
    t.equal((await refusedPty(h.url, sid, { token: events.body.token })).status, 401, "an execution's events token")
  })

  t.test('a plain GET (no upgrade) is 426 upgrade_required', async (t) => {
    const r = await api(h.url, 'GET', `/v1/sessions/${sid}/pty`)
    t.equal(r.status, 426)
    t.equal(r.body.code, 'upgrade_required')
    t.equal((await api(h.url, 'GET', `/v1/sessions/${other}/pty`)).status, 404, "another tenant's session is still 404")
  })

  t.test('the TypeScript client: pty() opens it with a token, typed errors before', async (t) => {
    const client = new ReplcastClient({ url: h.url, apiKey: API_KEY })
    const pty = await client.pty(sid, { cols: 70, rows: 20 })
    let shown = ''
    pty.onData((b) => (shown += Buffer.from(b).toString()))
    pty.write('echo "<$(stty size)>"\r')
    t.ok(await waitFor(() => shown.includes('<20 70>'), 30_000), 'the size asked for')
    pty.resize(72, 21)
    t.ok(
      await waitFor(async () => {
        pty.write('echo "<$(stty size)>"\r')
        return waitFor(() => shown.includes('<21 72>'), 500, 20)
      }, 10000),
      'and after a resize',
    )
    pty.write('exit 9\r')
    t.same(await pty.closed, { exitCode: 9, code: 1000, reason: 'the shell exited' })
    await t.rejects(client.pty(other), NotFoundError, "another tenant's session")
  })

  t.test('through an instance that does not hold the session, the upgrade goes to the holder', async (t) => {
    const second = await startApp(t, { REPLCAST_KEY_PREFIX: h.prefix, REPLCAST_DEPLOYMENT: h.deployment })
    const p = await openPty(second.url, sid, { cols: 90, rows: 30 })
    t.equal(await shellOutput(p, 'stty size; echo $REPLCAST_TERMINAL | wc -c'), '30 90\r\n17', 'the holder runs it (its size, its tag)')
    p.resize(100, 33)
    let size = ''
    t.ok(await waitFor(async () => (size = await shellOutput(p, 'stty size')) === '33 100', 30_000, 50), `resize frames pass through too (${size})`)
    const refused = await refusedPty(second.url, other)
    t.equal(refused.status, 404, "the holder's refusals come back as they are")
    p.type('exit 3\r')
    const closed = await p.closed
    t.equal(closed.code, 1000)
    t.same(p.exit(), { type: 'exit', exit_code: 3 }, 'the exit frame too')
    t.equal((await api(second.url, 'GET', `/v1/sessions/${sid}/pty`)).status, 426, 'a plain GET there too')
  })
})
