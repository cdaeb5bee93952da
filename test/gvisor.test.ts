// gVisor: runsc per session or by default (SANDBOX_RUNTIME=runsc) where the engine has it;
// a clear 400 where it does not. Hostile code under runsc is in hostile-runsc.test.ts.
import t from 'tap'
import Docker from 'dockerode'
import { release } from 'node:os'
import { randomBytes } from 'node:crypto'
import { pino } from 'pino'
import { buildApp } from '../src/app.js'
import { loadConfig } from '../src/config.js'
import { DockerSandboxDriver } from '../src/sandbox/docker-driver.js'
import { hostPidsLimit } from '../src/sandbox/container-spec.js'
import { containersOf, removeDeployment, startApp, testEnv } from './helpers/app.js'
import { api, createSession, executeSse, stdoutOf } from './helpers/client.js'
import { engineRuntimes } from './helpers/neighbour.js'

const hasRunsc = (await engineRuntimes()).has('runsc')
const LIMITS = { memory_mb: 256, pids: 64, cpus: 0.5 }

t.test('gVisor where the engine has runsc', { skip: hasRunsc ? false : 'the Docker engine has no runsc runtime' }, async (t) => {
  const h = await startApp(t, { SANDBOX_RUNTIME: 'runsc' })
  const inspect = async (sid: string) => {
    const c = (await containersOf(h.deployment)).find((x) => x.Labels['replcast.session'] === sid)
    return new Docker().getContainer(c!.Id).inspect()
  }
  const kernel = async (sid: string) => stdoutOf((await executeSse(h.url, sid, 'import platform\nprint(platform.release())')).events).trim()

  t.test("SANDBOX_RUNTIME=runsc makes runsc the default; the sandbox runs on gVisor's kernel", async (t) => {
    const r = await api(h.url, 'POST', '/v1/sessions', { limits: LIMITS })
    t.equal(r.status, 201)
    t.equal(r.body.runtime, 'runsc')
    const info = await inspect(r.body.id)
    t.equal(info.HostConfig.Runtime, 'runsc', 'the container runs under runsc')
    t.not(await kernel(r.body.id), release(), "the sandbox sees gVisor's kernel, not the host's")
    t.equal(info.HostConfig.NetworkMode, 'none')
    t.equal(info.HostConfig.ReadonlyRootfs, true)
    t.same(info.HostConfig.CapDrop, ['ALL'])
    await api(h.url, 'DELETE', `/v1/sessions/${r.body.id}`)
  })

  t.test('runtime per session: runc beside runsc', async (t) => {
    const sid = await createSession(h.url, { runtime: 'runc', limits: LIMITS })
    t.equal((await api(h.url, 'GET', `/v1/sessions/${sid}`)).body.runtime, 'runc')
    t.equal((await inspect(sid)).HostConfig.Runtime, 'runc')
    t.equal(await kernel(sid), release(), 'runc shares the host kernel')
    await api(h.url, 'DELETE', `/v1/sessions/${sid}`)
  })

  t.test("under runsc, pids is the guest's process limit and the cgroup gets a host-thread budget", async (t) => {
    const sid = await createSession(h.url, { runtime: 'runsc', limits: LIMITS })
    const info = await inspect(sid)
    t.equal(info.HostConfig.PidsLimit, hostPidsLimit('runsc', LIMITS.pids), "PidsLimit is the Sentry's thread budget")
    t.ok(info.HostConfig.PidsLimit! > LIMITS.pids * 4)
    t.same(
      info.HostConfig.Ulimits?.find((u) => u.Name === 'nproc'),
      { Name: 'nproc', Soft: LIMITS.pids, Hard: LIMITS.pids },
    )
    const r = await executeSse(h.url, sid, 'import resource\nprint(resource.getrlimit(resource.RLIMIT_NPROC))')
    t.equal(stdoutOf(r.events), `(${LIMITS.pids}, ${LIMITS.pids})\n`, 'the guest sees RLIMIT_NPROC = pids')
    // 20 live children fit (the Sentry used to die at about 30 with PidsLimit = pids).
    const kids = await executeSse(
      h.url,
      sid,
      'import subprocess\nps = [subprocess.Popen(["sleep", "5"]) for _ in range(20)]\nfor p in ps: p.kill()\nprint(sum(p.wait() == -9 for p in ps))',
      { timeout_s: 20 },
    )
    t.equal(stdoutOf(kids.events), '20\n', '20 child processes start and are reaped')
    await api(h.url, 'DELETE', `/v1/sessions/${sid}`)
  })
})

t.test('asking for runsc where the engine lacks it is a 400 that names the runtime, and nothing is created', async (t) => {
  class RuncOnlyDriver extends DockerSandboxDriver {
    override async runtimes(): Promise<Set<string>> {
      return new Set(['runc'])
    }
  }
  const tag = randomBytes(4).toString('hex')
  const config = loadConfig(
    testEnv({ REPLCAST_KEY_PREFIX: `replcast-test-${tag}:`, REPLCAST_DEPLOYMENT: `test-${tag}`, REPLCAST_INSTANCE_ID: `test-instance-${tag}`, PORT: '0' }),
  )
  const log = pino({ level: config.LOG_LEVEL })
  const app = await buildApp({ config, logger: log, driver: new RuncOnlyDriver(config.DOCKER_HOST, log) })
  t.teardown(async () => {
    await app.close()
    await removeDeployment(`test-${tag}`)
  })
  await app.listen({ host: '127.0.0.1', port: 0 })
  const url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`
  const r = await api(url, 'POST', '/v1/sessions', { runtime: 'runsc' })
  t.equal(r.status, 400)
  t.equal(r.body.code, 'runtime_unavailable')
  t.match(r.body.detail, /runsc/)
  t.same(await containersOf(`test-${tag}`), [], 'no container was created')
})
