// A session's terminal (GET /v1/sessions/{id}/pty) against the real engine: bash in /workspace as
// the sandbox's user, resize (stty size), state kept across commands, the exit frame, closing the
// socket or deleting/restarting the session ends the shell and what it started (checked inside the
// sandbox), at most MAX_TERMINALS_PER_SESSION at once, and bad text frames refused.
import t from 'tap'
import { containersOf, startApp } from './helpers/app.js'
import { api, createSession } from './helpers/client.js'
import { closePty, openPty, shellOutput } from './helpers/pty.js'
import { waitFor } from './helpers/wait.js'

/**
 * A terminal on the session once it has a free place: each test's terminals close at its end, and a
 * closed one frees its place a moment later (once what it started was killed).
 */
async function openFree(...args: Parameters<typeof openPty>): ReturnType<typeof openPty> {
  let opened: Awaited<ReturnType<typeof openPty>> | null = null
  let refusal: unknown = null
  const free = await waitFor(
    async () => {
      try {
        opened = await openPty(...args)
        return true
      } catch (err) {
        if ((err as { body?: { code?: string } }).body?.code !== 'too_many_terminals') throw err
        refusal = err
        return false
      }
    },
    10000,
    50,
  )
  if (!free || !opened) throw refusal
  return opened
}

/** The command lines of the sandbox's processes matching `re`, seen by a bash execution in the session. */
async function processesLike(base: string, sid: string, re: string): Promise<string[]> {
  const code = `for p in /proc/[0-9]*; do [ -r $p/cmdline ] && { tr '\\0' ' ' < $p/cmdline; echo; }; done 2>/dev/null | grep -E '${re}' | grep -v grep || true`
  const r = await api(base, 'POST', `/v1/sessions/${sid}/executions`, { code, language: 'bash' })
  if (r.status !== 200) throw new Error(`execution failed: ${r.status} ${JSON.stringify(r.body)}`)
  return (r.body.events as Array<{ type: string; text?: string }>)
    .filter((e) => e.type === 'stdout')
    .map((e) => e.text)
    .join('')
    .split('\n')
    .filter(Boolean)
}

t.test('a terminal', async (t) => {
  const h = await startApp(t, { MAX_TERMINALS_PER_SESSION: '2' })
  const sid = await createSession(h.url)

  t.test('runs bash in /workspace as the sandbox user, sized as asked; stty size follows a resize', async (t) => {
    const p = await openFree(h.url, sid, { cols: 100, rows: 40 })
    t.teardown(() => closePty(p))
    t.equal(await shellOutput(p, 'stty size; id -u; pwd; echo $TERM'), '40 100\r\n1000\r\n/workspace\r\nxterm-256color')
    p.resize(132, 50)
    // The resize goes to the engine on its own: poll until the shell sees it.
    let size = ''
    t.ok(await waitFor(async () => (size = await shellOutput(p, 'stty size')) === '50 132', 30_000, 50), `stty size after the resize: ${size}`)
    t.equal(await shellOutput(p, 'tput cols; tput lines 2>/dev/null || true'), '132\r\n50', 'programs see the new size too')
  })

  t.test('the shell keeps its state across commands (cd, a variable, a function)', async (t) => {
    const p = await openFree(h.url, sid)
    t.teardown(() => closePty(p))
    await shellOutput(p, 'mkdir -p d && cd d && X=41 && f() { echo "f:$1"; }')
    t.equal(await shellOutput(p, 'echo "$PWD $((X + 1))"; f ok'), '/workspace/d 42\r\nf:ok')
  })

  t.test('exit: a last text frame carries the exit code, then the socket closes normally', async (t) => {
    const p = await openFree(h.url, sid)
    p.type('exit 7\r')
    const closed = await p.closed
    t.equal(closed.code, 1000)
    t.same(p.exit(), { type: 'exit', exit_code: 7 })
  })

  t.test('closing the socket ends the shell and everything it started', async (t) => {
    const p = await openFree(h.url, sid)
    await shellOutput(p, '(sleep 4101 &) ; nohup sleep 4102 >/dev/null 2>&1 & setsid sleep 4103 & env -i /bin/sleep 4104 & true')
    t.equal((await processesLike(h.url, sid, 'sleep 410[1-4]')).length, 4, 'four processes run in the sandbox')
    await closePty(p)
    let left: string[] = []
    t.ok(await waitFor(async () => (left = await processesLike(h.url, sid, 'sleep 410|bash -i')).length === 0, 30_000, 100), `none is left: ${left.join('; ')}`)
  })

  t.test('at most MAX_TERMINALS_PER_SESSION at once; a closed one frees its place', async (t) => {
    const own = await createSession(h.url)
    const a = await openPty(h.url, own)
    const b = await openPty(h.url, own)
    const refused = await openPty(h.url, own).then(
      async (p) => (await closePty(p), null),
      (err: { status: number; body: { code: string } }) => err,
    )
    t.equal(refused?.status, 409)
    t.equal(refused?.body.code, 'too_many_terminals')
    await closePty(a)
    // Its place is free once what it started was killed (a moment after the socket closed).
    let c: Awaited<ReturnType<typeof openPty>> | null = null
    t.ok(await waitFor(async () => (c = await openPty(h.url, own).catch(() => null)) !== null, 30_000, 50), 'a third opens once one closed')
    await closePty(c!)
    await closePty(b)
  })

  t.test('a text frame that is not a resize closes the socket (1008)', async (t) => {
    const p = await openFree(h.url, sid)
    t.teardown(() => closePty(p))
    p.ws.send('{"type":"resize","cols":0,"rows":24}')
    const closed = await p.closed
    t.equal(closed.code, 1008)
    t.match(closed.reason, /resize/)
  })

  t.test('restarting the session closes its terminals (1001) and what they started is gone', async (t) => {
    const p = await openFree(h.url, sid)
    await shellOutput(p, 'sleep 4201 & true')
    t.equal((await api(h.url, 'POST', `/v1/sessions/${sid}/restart`)).status, 200)
    const closed = await p.closed
    t.equal(closed.code, 1001)
    t.match(closed.reason, /session/)
    t.same(await processesLike(h.url, sid, 'sleep 4201|bash -i'), [])
    const again = await openFree(h.url, sid)
    t.equal(await shellOutput(again, 'echo fresh'), 'fresh', 'the restarted session opens a terminal')
    await closePty(again)
  })

  t.test('a terminal in use keeps its session from being reaped as idle', async (t) => {
    const idle = await createSession(h.url, { idle_timeout_s: 2 })
    const p = await openPty(h.url, idle)
    t.teardown(() => closePty(p))
    // Six seconds of output, three idle timeouts' worth: only the terminal's use keeps the session.
    p.type('for i in 1 2 3 4 5 6; do sleep 1; echo "tick-$i"; done\r')
    await p.until(/\ntick-6\r\n/, 30000)
    t.equal((await api(h.url, 'GET', `/v1/sessions/${idle}`)).status, 200, 'the session is still there')
    await shellOutput(p, 'true')
  })

  t.test('an instance that stops closes its terminals (1001); the session opens one again after', async (t) => {
    const p = await openFree(h.url, sid)
    await shellOutput(p, 'true')
    const stopping = h.restart()
    const closed = await p.closed
    t.equal(closed.code, 1001)
    t.match(closed.reason, /stopping/)
    await stopping
    const again = await openFree(h.url, sid)
    t.equal(await shellOutput(again, 'echo back'), 'back')
    t.equal((await processesLike(h.url, sid, '^/bin/bash -i')).length, 1, "the stopped instance's shell is gone; only the new one runs")
    await closePty(again)
  })

  t.test('under gVisor (runsc) too: the size, a resize, and nothing left behind', async (t) => {
    const gv = await createSession(h.url, { runtime: 'runsc' })
    const p = await openPty(h.url, gv, { cols: 90, rows: 25 })
    t.equal(await shellOutput(p, 'stty size; id -u'), '25 90\r\n1000')
    p.resize(101, 31)
    let size = ''
    t.ok(await waitFor(async () => (size = await shellOutput(p, 'stty size')) === '31 101', 30_000, 50), `stty size after the resize: ${size}`)
    await shellOutput(p, 'setsid sleep 4301 & sleep 4302 & true')
    t.equal((await processesLike(h.url, gv, 'sleep 430[12]')).length, 2)
    await closePty(p)
    let left: string[] = []
    t.ok(await waitFor(async () => (left = await processesLike(h.url, gv, 'sleep 430|bash -i')).length === 0, 30_000, 100), `none is left: ${left.join('; ')}`)
  })

  t.test('deleting the session closes its terminals (1001) and ends the shell with its sandbox', async (t) => {
    const other = await createSession(h.url)
    const p = await openPty(h.url, other)
    await shellOutput(p, 'sleep 4401 & true')
    t.equal((await api(h.url, 'DELETE', `/v1/sessions/${other}`)).status, 204)
    const closed = await p.closed
    t.equal(closed.code, 1001)
    t.match(closed.reason, /deleted/)
    const left = (await containersOf(h.deployment)).filter((c) => c.Names.some((n) => n.includes(other)))
    t.same(left, [], 'its container, and every process in it, is gone')
  })
})
