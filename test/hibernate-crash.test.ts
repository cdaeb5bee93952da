// An API instance killed (SIGKILL) in the middle of a wake: the session is still hibernated with its
// checkpoint, the container the wake had made is swept when the instance starts again, and the next
// request wakes the session with its state.
import t from 'tap'
import Docker from 'dockerode'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { LABEL } from '../src/sandbox/labels.js'
import { api, createSession, executeSse, stdoutOf } from './helpers/client.js'
import { checkpointEngineHost } from './helpers/hibernation.js'
import { isolatedServer, killHard } from './helpers/server-process.js'
import { waitFor } from './helpers/wait.js'

t.test('a crash mid-wake leaves the session hibernated, and it wakes afterwards', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'rc-checkpoints-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const h = await isolatedServer(t, 'crash', { DOCKER_HOST: await checkpointEngineHost(), SANDBOX_RUNTIME: 'runsc', CHECKPOINT_DIR: dir })
  const docker = new Docker()
  const containers = (sid: string) => docker.listContainers({ all: true, filters: { label: [`${LABEL.session}=${sid}`] } })
  const sid = await createSession(h.server.url)
  // 100 MB of random floats: its restore takes seconds, so the kill lands in the middle of it.
  await executeSse(h.server.url, sid, 'import numpy\nbig = numpy.random.rand(12_500_000)\ntotal = float(big.sum())')
  t.equal((await api(h.server.url, 'POST', `/v1/sessions/${sid}/hibernate`)).body.status, 'hibernated')
  const waking = api(h.server.url, 'POST', `/v1/sessions/${sid}/wake`).catch(() => null)
  t.ok(await waitFor(async () => (await containers(sid)).length > 0, 20000, 10), 'the wake made its container')
  await killHard(h.server)
  await waking
  await h.respawn()
  t.equal((await api(h.server.url, 'GET', `/v1/sessions/${sid}`)).body.status, 'hibernated', 'still hibernated')
  t.equal((await containers(sid)).length, 0, "the cut-short wake's container was swept at start")
  const out = stdoutOf((await executeSse(h.server.url, sid, 'print(float(big.sum()) == total)')).events)
  t.equal(out, 'True\n', 'woken with its state')
})
