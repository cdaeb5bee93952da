// A dockerd restart with sessions hibernated: their checkpoints live in CHECKPOINT_DIR, outside the
// engine, so after the engine comes back each wakes on use with its namespace and workspace, under
// its id, and can be hibernated and woken again. The engine restarted is one of the test's own (a
// second dockerd in experimental mode, test/helpers/second-engine.ts), never the machine's.
import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { api, createSession, stdoutText } from './helpers/client.js'
import { checkpointEngineHost } from './helpers/hibernation.js'
import { startSecondEngine } from './helpers/second-engine.js'
import { isolatedServer } from './helpers/server-process.js'

const code = async (url: string, sid: string, src: string) => {
  const r = await api(url, 'POST', `/v1/sessions/${sid}/executions`, { code: src })
  return { status: r.status, out: stdoutText(r.body?.events), body: r.body }
}

t.test('hibernated sessions wake with their state after a dockerd restart', async (t) => {
  // The machine's engine is only read (its runtimes, its image); the restarted one is the test's.
  await checkpointEngineHost()
  const engine = await startSecondEngine({ experimental: true })
  t.teardown(() => engine.stop())
  const shared = mkdtempSync(join(tmpdir(), 'rc-dockerd-cp-'))
  t.teardown(() => rmSync(shared, { recursive: true, force: true }))
  const h = await isolatedServer(t, 'dockerd', { DOCKER_HOST: engine.host, SANDBOX_RUNTIME: 'runsc', CHECKPOINT_DIR: join(shared, 'store') })
  const url = h.server.url

  const sids = [await createSession(url), await createSession(url)]
  for (const [i, sid] of sids.entries()) {
    const r = await code(
      url,
      sid,
      `import os\nvalue = ${i} * 100 + 7\nopen('/workspace/kept.txt', 'w').write('file ${i}')\nos.chdir('/workspace')\nprint('set')`,
    )
    t.equal(r.out, 'set\n', `session ${i} set up`)
    const hib = await api(url, 'POST', `/v1/sessions/${sid}/hibernate`)
    t.equal(hib.body.status, 'hibernated', `session ${i} hibernated`, { body: hib.body })
  }
  t.same(await engine.docker.listContainers({ all: true }), [], 'no container while they are hibernated')

  await engine.restart()
  t.pass('dockerd restarted')
  for (const sid of sids) t.equal((await api(url, 'GET', `/v1/sessions/${sid}`)).body.status, 'hibernated', 'still hibernated after the restart')

  for (const [i, sid] of sids.entries()) {
    const r = await code(url, sid, `print(value, open('kept.txt').read(), os.getcwd())`)
    t.equal(r.status, 200, `session ${i} wakes on the restarted engine`, { body: r.body })
    t.equal(r.out, `${i * 100 + 7} file ${i} /workspace\n`, `session ${i}: its variable, its file and its cwd are kept`)
    const s = (await api(url, 'GET', `/v1/sessions/${sid}`)).body
    t.equal(s.id, sid, 'under its id')
    t.equal(s.status, 'ready')
  }
  // One more cycle on the restarted engine.
  const [first] = sids as [string, string]
  t.equal((await api(url, 'POST', `/v1/sessions/${first}/hibernate`)).body.status, 'hibernated', 'hibernated again after the restart')
  t.equal((await code(url, first, 'value += 1\nprint(value)')).out, '8\n', 'and woken again with its state')
})
