// Hibernation from the TypeScript client (hibernate, wake, wake on use, typed errors for busy, runc
// and another tenant's session) and from the CLI as a user runs it (`replcast hibernate`, `wake`),
// on the real engine with runsc: what the code set before is there after.
import t from 'tap'
import { ConflictError, NotFoundError, ReplcastClient, type Execution } from '../clients/typescript/src/index.ts'
import { API_KEY, OTHER_KEY } from './helpers/app.js'
import { runCli } from './helpers/cli.js'
import { stdoutText } from './helpers/client.js'
import { startHibernationApp } from './helpers/hibernation.js'

/** An execution's stdout, joined. */
const stdout = (ex: Execution) => stdoutText(ex.events)

t.test('hibernation from the client and the CLI', async (t) => {
  const h = await startHibernationApp(t)
  const client = new ReplcastClient({ url: h.url, apiKey: API_KEY })

  t.test('client: hibernate, wake, wake on use; the state kept each time', async (t) => {
    const s = await client.createSession({ runtime: 'runsc', idle_action: 'hibernate', hibernated_ttl_s: 600 })
    t.match(s, { runtime: 'runsc', idle_action: 'hibernate', hibernated_ttl_s: 600 }, 'the create options are kept')
    t.equal(stdout(await client.execute(s.id, "x = 41\nopen('/workspace/f.txt', 'w').write('kept')\nprint('set')")), 'set\n')

    const slept = await client.hibernate(s.id)
    t.equal(slept.id, s.id)
    t.equal(slept.status, 'hibernated')
    t.ok(slept.hibernated_at && Date.parse(slept.hibernated_at) > 0, 'hibernated_at is a time')
    t.equal((await client.getSession(s.id)).status, 'hibernated', 'getSession does not wake it')
    const again = await client.hibernate(s.id)
    t.equal(again.hibernated_at, slept.hibernated_at, 'hibernating a hibernated session changes nothing')

    const woken = await client.wake(s.id)
    t.equal(woken.status, 'ready')
    t.notOk(woken.hibernated_at, 'no hibernated_at once awake')
    t.equal(stdout(await client.execute(s.id, "x += 1\nprint(x, open('/workspace/f.txt').read())")), '42 kept\n', 'variable and file kept across wake()')
    t.equal((await client.wake(s.id)).status, 'ready', 'waking a live session answers it as it is')

    await client.hibernate(s.id)
    t.equal(stdout(await client.execute(s.id, 'x += 1\nprint(x)')), '43\n', 'an execution wakes it, state kept')
    t.equal((await client.getSession(s.id)).status, 'ready')
  })

  t.test('client: typed errors for a busy session, a runc session, another tenant', async (t) => {
    const busy = await client.createSession({ runtime: 'runsc' })
    const run = await client.stream(busy.id, 'import time\nprint("started", flush=True)\ntime.sleep(60)')
    for await (const e of run) if (e.type === 'stdout') break
    const refused = await client.hibernate(busy.id).catch((err: unknown) => err)
    t.ok(refused instanceof ConflictError && refused.is('session_busy'), 'busy: ConflictError session_busy', { err: refused })
    await client.interrupt(busy.id)

    const runc = await client.createSession({ runtime: 'runc' })
    const notSupported = await client.hibernate(runc.id).catch((err: unknown) => err)
    t.ok(notSupported instanceof ConflictError && notSupported.is('not_supported'), 'runc: ConflictError not_supported', { err: notSupported })
    t.match((notSupported as ConflictError).message, /runsc|runc/, 'it says why')
    t.equal((await client.getSession(runc.id)).status, 'ready', 'the runc session runs on')

    const other = new ReplcastClient({ url: h.url, apiKey: OTHER_KEY })
    for (const call of [() => other.hibernate(busy.id), () => other.wake(busy.id)]) {
      const err = await call().catch((e: unknown) => e)
      t.ok(err instanceof NotFoundError && err.is('session_not_found'), "another tenant's session is not found")
    }
  })

  t.test('CLI: replcast hibernate, sessions ls, wake, run wakes it', async (t) => {
    const sid = (await client.createSession({ runtime: 'runsc' })).id
    t.equal((await runCli(h.url, ['run', '--session', sid, '-c', "y = 'seven'\nprint('set')"])).out, 'set\n')

    const slept = await runCli(h.url, ['hibernate', sid])
    t.equal(slept.code, 0, slept.err)
    t.match(slept.out, new RegExp(`^hibernated ${sid} \\(at \\d{4}-`))
    t.match((await runCli(h.url, ['sessions', 'ls'])).out, new RegExp(`${sid}\\s+hibernated\\s+runsc`), 'sessions ls shows it hibernated')

    const woke = await runCli(h.url, ['wake', sid])
    t.equal(woke.code, 0, woke.err)
    t.equal(woke.out, `ready ${sid}\n`)
    t.equal((await runCli(h.url, ['run', '--session', sid, '-c', 'print(y)'])).out, 'seven\n', 'the variable is kept across hibernate and wake')

    const json = await runCli(h.url, ['hibernate', sid, '--json'])
    t.match(JSON.parse(json.out), [{ id: sid, status: 'hibernated' }], '--json prints the sessions')
    const ran = await runCli(h.url, ['run', '--session', sid, '-c', "print(y + ' again')"])
    t.equal(ran.code, 0, ran.err)
    t.equal(ran.out, 'seven again\n', 'run wakes it, state kept')
  })

  t.test('CLI: refusals and usage', async (t) => {
    const runc = (await client.createSession({ runtime: 'runc' })).id
    const refused = await runCli(h.url, ['hibernate', runc])
    t.equal(refused.code, 3, 'an API error exits 3')
    t.match(refused.err, new RegExp(`^replcast: ${runc}: not_supported: `))
    const missing = await runCli(h.url, ['wake', 'ses_00000000000000000000'])
    t.equal(missing.code, 3)
    t.match(missing.err, /session_not_found/)
    const usage = await runCli(h.url, ['hibernate'])
    t.equal(usage.code, 2)
    t.match(usage.err, /name the sessions/)
    const help = await runCli(h.url, ['--help'])
    t.match(help.out, /\n {2}hibernate +put sessions to sleep/)
    t.match(help.out, /\n {2}wake +wake hibernated sessions/)
  })
})
