// Redis through Sentinel (REDIS_SENTINELS, REDIS_SENTINEL_NAME): the app finds the master through
// the sentinel, and when the master is killed (SIGKILL) and the sentinel promotes the replica, the
// app goes on by itself: an execution running across the failover ends with its output and one
// `done`, a new execution runs in the same namespace, and earlier executions' events are still there.
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { pino } from 'pino'
import { buildApp } from '../src/app.js'
import { loadConfig } from '../src/config.js'
import { API_KEY, removeDeployment, testEnv } from './helpers/app.js'
import { api, createSession, stdoutOf, stdoutText } from './helpers/client.js'
import { executeWithin } from './helpers/neighbour.js'
import { MASTER_NAME, startSentinelSetup } from './helpers/sentinel.js'
import { waitFor } from './helpers/wait.js'

const auth = { authorization: `Bearer ${API_KEY}` }

t.test('the app follows a Redis failover through Sentinel', async (t) => {
  const s = await startSentinelSetup()
  t.teardown(() => s.destroy())
  const tag = randomBytes(4).toString('hex')
  const prefix = `replcast-test-${tag}:`
  const deployment = `test-${tag}`
  const config = loadConfig(
    testEnv({
      // With sentinels, REDIS_URL gives only credentials and database: the master is the sentinel's to name.
      REDIS_URL: `redis://127.0.0.1:${s.ports.primary}`,
      REDIS_SENTINELS: s.sentinels,
      REDIS_SENTINEL_NAME: MASTER_NAME,
      REPLCAST_KEY_PREFIX: prefix,
      REPLCAST_DEPLOYMENT: deployment,
      REPLCAST_INSTANCE_ID: `sentinel-${tag}`,
      PORT: '0',
    }),
  )
  const app = await buildApp({ config, logger: pino({ level: config.LOG_LEVEL }) })
  t.teardown(async () => {
    await app.close()
    await removeDeployment(deployment)
  })
  await app.listen({ host: '127.0.0.1', port: 0 })
  const url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`

  const sid = await createSession(url)
  const first = await api(url, 'POST', `/v1/sessions/${sid}/executions`, { code: 'x = 42\nprint("set")' })
  t.equal(first.status, 200)
  t.equal(stdoutText(first.body.events), 'set\n')
  const primary = s.direct(s.ports.primary)
  t.ok((await primary.exists(`${prefix}{${sid}}:session`)) === 1, "the session is in the sentinel's master")

  // An execution that waits (for a file the test writes after the failover) while the master dies.
  const code = 'import os, time\nprint("before", flush=True)\nwhile not os.path.exists("/workspace/go"): time.sleep(0.05)\nprint(x)'
  const running = executeWithin(url, sid, code, { key: API_KEY, timeout_s: 120, withinMs: 120_000 })
  t.ok(
    await waitFor(async () => {
      const list = await primary.keys(`${prefix}{${sid}}:events:*`)
      for (const k of list) if ((await primary.xrange(k, '-', '+')).some(([, f]) => f.join(' ').includes('before'))) return true
      return false
    }, 20000),
    'the running execution printed before the failover',
  )
  // Replicated before the kill: what docs/reliability.md promises is kept is on the replica.
  t.ok((await primary.wait(1, 5000)) >= 1, 'the replica has every write')
  primary.disconnect()
  const killedAt = Date.now()
  await s.crash(s.ports.primary)
  t.ok(await waitFor(async () => (await s.masterPort()) === s.ports.replica, 30000, 100), 'the sentinel promoted the replica')

  // The app reaches the new master by itself: a file call (Redis, then docker exec) succeeds.
  let put = 0
  t.ok(
    await waitFor(
      async () => {
        put = (await fetch(`${url}/v1/sessions/${sid}/files/go`, { method: 'PUT', headers: auth, body: 'go' })).status
        return put === 201
      },
      30000,
      200,
    ),
    `the app works through the new master (last status ${put})`,
  )
  t.comment(`a request succeeded ${Date.now() - killedAt} ms after the master was killed`)
  const during = await running
  t.equal(during.status, 200)
  t.equal(stdoutOf(during.events), 'before\n42\n', 'the execution running across the failover kept its output')
  const dones = during.events.filter((e) => e.event === 'done')
  t.equal(dones.length, 1, 'one done')
  t.equal(dones[0]?.data.status, 'ok')

  const after = await api(url, 'POST', `/v1/sessions/${sid}/executions`, { code: 'print(x + 1)' })
  t.equal(after.status, 200, 'a new execution after the failover')
  t.equal(stdoutText(after.body.events), '43\n', 'in the same namespace')
  const old = await api(url, 'GET', first.headers.get('location')!)
  t.equal(old.status, 200, 'an execution from before the failover is still there')
  t.equal(stdoutText(old.body.events), 'set\n', 'with its events')
  const newMaster = s.direct(s.ports.replica)
  t.equal(await newMaster.exists(`${prefix}{${sid}}:session`), 1, 'on the promoted replica')
  const keys = await newMaster.keys(`${prefix}*`)
  t.equal((await api(url, 'DELETE', `/v1/sessions/${sid}`)).status, 204)
  if (keys.length) await newMaster.del(...keys)
  newMaster.disconnect()
})
