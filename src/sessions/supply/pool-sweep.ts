// The orphan sweep of warm-pool containers (their labels name no session, so the reaper's sweep
// leaves them here): a pooled sandbox of an API instance that is gone (its heartbeat lapsed), one
// this instance made before it restarted (the pool is not re-adopted), and one whose session Redis
// no longer knows are removed; bindings whose container is gone are dropped.
import type { Logger } from 'pino'
import type { Config } from '../../config.js'
import type { ManagedContainer, SandboxDriver } from '../../sandbox/driver.js'
import type { PoolStore } from '../../store/pool-store.js'
import type { Engines } from './engines.js'
import type { WarmPool } from './pool.js'

export interface PoolSweepDeps {
  config: Config
  driver: SandboxDriver
  log: Logger
  pool: WarmPool
  poolStore: PoolStore
  engines: Pick<Engines, 'local'>
}

export class PoolSweep {
  constructor(private readonly deps: PoolSweepDeps) {}

  async sweep(): Promise<void> {
    const { config, driver, pool, poolStore, log } = this.deps
    // Bindings are read before the containers are listed: a container bound after this read existed
    // before it, so it is listed below, and a binding whose container is not listed is of one gone.
    const bindings = await poolStore.bindings()
    const all = await driver.listManaged(config.REPLCAST_DEPLOYMENT)
    const pooled = all.filter((c) => c.pooled)
    const sessions = await poolStore.existingSessions([...new Set(pooled.flatMap((c) => bindings.get(c.id) ?? []))])
    const others = [...new Set(pooled.filter((c) => !bindings.has(c.id) && c.instance !== config.instanceId).map((c) => c.instance))]
    const alive = await poolStore.aliveInstances(others)
    const doomed: Array<{ c: ManagedContainer; why: string }> = []
    for (const c of pooled) {
      const sid = bindings.get(c.id)
      if (sid !== undefined) {
        if (!sessions.has(sid)) doomed.push({ c, why: 'its session is gone' })
      } else if (c.instance === config.instanceId) {
        if (!pool.owns(c.name)) doomed.push({ c, why: 'left by an earlier run of this instance' })
      } else if (!alive.has(c.instance)) {
        doomed.push({ c, why: 'its API instance is gone' })
      }
    }
    // A container unbound above may have been taken and bound since (this instance lets go of its
    // name once the binding is written): the binding is read again before anything is removed.
    const boundSince = await poolStore.bound(doomed.filter((d) => !bindings.has(d.c.id)).map((d) => d.c.id))
    const listed = new Set(all.map((c) => c.id))
    for (const { c, why } of doomed.filter((d) => !boundSince.has(d.c.id))) {
      log.warn({ containerId: c.id, instance: c.instance, boundTo: bindings.get(c.id) }, `removing a warm-pool sandbox: ${why}`)
      try {
        await driver.remove(c.id)
        listed.delete(c.id)
      } catch (err) {
        log.warn({ err, containerId: c.id }, 'could not remove a warm-pool sandbox; the next sweep tries again')
      }
    }
    // Only this engine's containers are listed: a binding whose container is not is dropped only when
    // its session is gone or is on this engine (another engine's bound sandboxes are its own sweeps').
    const unlisted = [...bindings.keys()].filter((id) => !listed.has(id))
    const engines = await poolStore.sessionEngines([...new Set(unlisted.map((id) => bindings.get(id)!))])
    const here = this.deps.engines.local()
    await poolStore.unbind(unlisted.filter((id) => !engines.has(bindings.get(id)!) || engines.get(bindings.get(id)!) === here))
  }
}
