// Hibernation tests need an engine that can checkpoint: experimental mode on and runsc registered.
// DOCKER_HOST names it (scripts/setup.sh turns experimental mode on for the local engine). An engine
// that cannot is a failure with the reason, never a skip: these tests prove the feature exists.
import type { Test } from 'tap'
import Docker from 'dockerode'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startApp, type Harness } from './app.js'
import { api } from './client.js'

/** The engine's address, once it is known to checkpoint; throws saying what is missing. */
export async function checkpointEngineHost(): Promise<string> {
  const host = process.env.DOCKER_HOST ?? ''
  const info = (await new Docker().info()) as { ExperimentalBuild?: boolean; Runtimes?: Record<string, unknown> }
  const missing = [!info.ExperimentalBuild && 'experimental mode is off', !info.Runtimes?.runsc && 'runsc is not registered'].filter(Boolean)
  if (missing.length)
    throw new Error(`the Docker engine at ${host || 'the default socket'} cannot checkpoint (${missing.join(', ')}): point DOCKER_HOST at one that can`)
  return host
}

export interface HibernationHarness extends Harness {
  /** This app's checkpoint folder (CHECKPOINT_DIR). */
  checkpointDir: string
}

/** An app on the checkpointing engine with a checkpoint folder of its own (removed at teardown). */
export async function startHibernationApp(t: Test, env: Record<string, string> = {}): Promise<HibernationHarness> {
  const host = await checkpointEngineHost()
  const checkpointDir = env.CHECKPOINT_DIR ?? join(mkdtempSync(join(tmpdir(), 'rc-checkpoints-')), 'store')
  if (!env.CHECKPOINT_DIR) t.teardown(() => rmSync(join(checkpointDir, '..'), { recursive: true, force: true }))
  const h = await startApp(t, { DOCKER_HOST: host, SANDBOX_RUNTIME: 'runsc', CHECKPOINT_DIR: checkpointDir, ...env })
  return Object.assign(h, { checkpointDir })
}

/** Hibernates the session and checks the answer says so. */
export async function hibernate(t: Test, url: string, sid: string): Promise<any> {
  const r = await api(url, 'POST', `/v1/sessions/${sid}/hibernate`)
  t.equal(r.status, 200, 'hibernate answers 200', { body: r.body })
  t.equal(r.body.status, 'hibernated')
  return r.body
}
