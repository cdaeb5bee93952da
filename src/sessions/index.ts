// The sessions layer's public face: one factory that wires its parts, the two services the HTTP
// routes and the agent use (SessionService for lifecycle, Executions for running code and reading
// events), and start/close for the app's hooks.
import type { Logger } from 'pino'
import type { Config } from '../config.js'
import type { SandboxDriver } from '../sandbox/driver.js'
import type { EventFeed } from '../store/event-feed.js'
import type { Stores } from '../store/stores.js'
import { Adoption } from './adoption.js'
import { DrivenLogs, ExecutionRunner, type LlmRequestHandler, RecordedExecutions } from './runner/index.js'
import { CheckpointStore, Engines, HostCapacity, WarmPool, PoolSweep, SandboxSource, TemplateImages } from './supply/index.js'
import { Executions } from './executions.js'
import type { Metrics } from '../metrics.js'
import { Reaper } from './reaper.js'
import { OneShots } from './one-shot.js'
import { SessionRegistry } from './registry.js'
import { SessionService } from './session-service.js'
import { SessionFiles } from './files.js'
import { ProcessRunner, Processes } from './processes/index.js'
import { SessionTerminals } from './terminals.js'
import { Hibernation } from './hibernation.js'
import { CheckpointSweep } from './checkpoint-sweep.js'
import { Snapshots } from './snapshots.js'

export type { SessionService } from './session-service.js'
export type { Snapshots } from './snapshots.js'
export type { RemoteCopies } from './checkpoint-copies.js'
export type { SessionFiles } from './files.js'
export type { OneShots } from './one-shot.js'
export type { Processes } from './processes/index.js'
export type { SessionTerminal, SessionTerminals } from './terminals.js'
export type { ExecutionRead, Executions, StreamedRun } from './executions.js'
export type { Engines, TemplateImages } from './supply/index.js'
export type { DrivenLog, EventPayload, LlmReply, LlmRequestContext, LlmRequestHandler, RunningExecution } from './runner/index.js'

export interface SessionLayerDeps {
  config: Config
  stores: Stores
  feed: EventFeed
  driver: SandboxDriver
  log: Logger
  metrics: Metrics
  /** Answers sandbox code's llm_query/llm_batch; without it they fail with a clear error. */
  llmRequests?: LlmRequestHandler
}

export interface SessionLayer {
  sessions: SessionService
  /** Snapshots of sessions, sessions started from them, forks. */
  snapshots: Snapshots
  executions: Executions
  /** POST /v1/execute: code in a fresh sandbox (from the warm pool), removed after its `done`. */
  oneShots: OneShots
  /** A session's /workspace files (also `files.write(sessionId, path, data)` for one-shot input files). */
  files: SessionFiles
  /** A session's background processes (started, fed and signalled on its holder; read from Redis anywhere). */
  processes: Processes
  /** Terminals (an interactive bash in the sandbox) of the sessions held here. */
  terminals: SessionTerminals
  templates: TemplateImages
  /** This instance's Docker engine among the others: where new sessions go, where a session's sandbox is. */
  engines: Engines
  /** Removes leftover containers, re-adopts this instance's sessions, starts the reaper and lease renewal. */
  start(): Promise<void>
  /** Stops background work and detaches from every sandbox (they keep running, for re-adoption); removes the warm pool's. */
  close(): Promise<void>
  /** Sessions attached to this instance. */
  attachedCount(): number
  /** Whether this instance holds the session (memory only: no Redis round trip). */
  holds(sid: string): boolean
  /** Attaches the session here unless another live instance holds it (see Adoption.takeOver). */
  takeOver(sid: string, from: string | null): Promise<'attached' | 'elsewhere' | 'unavailable'>
  /** A live instance on the session's Docker engine when that is not this one's; null: here, or none left there. */
  instanceFor(sid: string): Promise<string | null>
  /**
   * The instance is stopping: no more adoptions or background work; every sandbox is let go (it
   * keeps running, and so do its executions) and its lease freed at once for another instance.
   */
  handOver(): Promise<void>
}

export function createSessionLayer(deps: SessionLayerDeps): SessionLayer {
  const { config, stores, feed, driver, log, metrics } = deps
  // The runner lets go of a session it cannot go on with through adoption (built below, called later).
  const runner = new ExecutionRunner({ ...deps, letGo: (live, why) => void adoption.letGo(live, why) })
  const registry = new SessionRegistry(runner, metrics)
  const processRunner = new ProcessRunner({
    config,
    stores,
    feed,
    log: log.child({ component: 'processes' }),
    letGo: (live, why) => void adoption.letGo(live, why),
  })
  registry.onRelease((live) => processRunner.abandon(live))
  const recorded = new RecordedExecutions(config, stores, feed)
  const driven = new DrivenLogs(stores, feed)
  const capacity = new HostCapacity(driver.memory, config.HOST_MEMORY_SHARE, log)
  const checkpoints = new CheckpointStore(config.CHECKPOINT_DIR)
  metrics.checkpointUsage.read = () => checkpoints.usage()
  metrics.snapshotUsage.read = () => stores.snapshots.usage()
  const engines = new Engines({ config, driver, capacity, store: stores.engines, log: log.child({ component: 'engines' }), records: stores.sessions })
  const templates = new TemplateImages(config, driver, log)
  const pool = new WarmPool({ config, driver, log: log.child({ component: 'pool' }), metrics, capacity, templates, poolStore: stores.pool })
  const poolSweep = new PoolSweep({ config, driver, log, pool, poolStore: stores.pool, engines })
  const sandboxes = new SandboxSource({ config, driver, capacity, templates, pool, checkpoints })
  const adoption = new Adoption({
    config,
    stores,
    driver,
    log,
    registry,
    runner,
    recorded,
    driven,
    llmRequests: deps.llmRequests,
    engines,
    processes: processRunner,
    sandboxes,
    checkpoints,
    metrics,
  })
  const hibernation = new Hibernation({ config, stores, driver, log, metrics, registry, runner, driven, adoption, checkpoints, engines, sandboxes })
  const sessions = new SessionService({
    config,
    stores,
    driver,
    log,
    metrics,
    registry,
    runner,
    adoption,
    recorded,
    sandboxes,
    engines,
    processes: processRunner,
    hibernation,
    checkpoints,
  })
  const snapshots = new Snapshots({
    config,
    stores,
    driver,
    sessions,
    checkpoints,
    log: log.child({ component: 'snapshots' }),
    engine: () => engines.local(),
    engines,
  })
  const checkpointSweep = new CheckpointSweep({ stores, checkpoints, snapshots, log: log.child({ component: 'checkpoints' }) })
  const executions = new Executions({ config, stores, feed, sessions, registry, adoption, runner, driven })
  const workspace = driver.workspaceFiles(config.SANDBOX_USER, config.FILE_STALL_TIMEOUT_MS)
  const files = new SessionFiles({ config, stores, sessions, files: workspace, log: log.child({ component: 'files' }), engines })
  const processes = new Processes({
    stores,
    feed,
    runner: processRunner,
    session: (tenant, sid) => sessions.record(tenant, sid),
    usable: (rec) => sessions.usable(rec),
    holds: (sid) => registry.has(sid),
  })
  const oneShots = new OneShots({ config, sessions, executions, files, pool, log })
  const terminals = new SessionTerminals({ config, stores, sessions, driver, registry, engines, log: log.child({ component: 'terminals' }) })
  const reaper = new Reaper({ config, stores, driver, log, metrics, registry, sessions, adoption, runner, recorded, driven, engines })
  const timers: NodeJS.Timeout[] = []
  let closed = false

  /** Runs `fn` every `ms`, never two at once, never after close. */
  const every = (ms: number, fn: () => Promise<unknown>) => {
    let busy = false
    const t = setInterval(() => {
      if (busy || closed) return
      busy = true
      fn()
        .catch((err: unknown) => log.warn({ err }, 'background task failed'))
        .finally(() => {
          busy = false
        })
    }, ms)
    t.unref()
    timers.push(t)
  }

  return {
    sessions,
    snapshots,
    executions,
    oneShots,
    files,
    processes,
    terminals,
    templates,
    engines,
    async start() {
      await engines.start()
      await reaper.removeOrphans()
      await checkpointSweep.sweep().catch((err: unknown) => log.warn({ err }, 'the checkpoint sweep failed at start; it runs again soon'))
      await poolSweep.sweep().catch((err: unknown) => log.warn({ err }, 'the warm-pool sweep failed at start; it runs again soon'))
      await adoption.readoptAll()
      every(config.REAPER_INTERVAL_MS, () => reaper.reapDue())
      every(Math.floor(config.LEASE_TTL_MS / 3), () => adoption.renewLeases())
      every(Math.floor(config.LEASE_TTL_MS / 3), () => pool.heartbeat())
      every(Math.floor(config.LEASE_TTL_MS / 3), () => engines.report())
      every(config.LEASE_TTL_MS, () => poolSweep.sweep())
      every(config.LEASE_TTL_MS, () => checkpointSweep.sweep())
      await pool.start()
      void templates.checkAll()
    },
    async close() {
      closed = true
      for (const t of timers) clearInterval(t)
      registry.releaseAll()
      await terminals.close()
      await pool.close()
      await engines.close().catch((err: unknown) => log.warn({ err }, 'could not withdraw from the engine report'))
    },
    attachedCount: () => registry.size,
    holds: (sid) => registry.has(sid) || adoption.isCreating(sid),
    takeOver: (sid, from) => adoption.takeOver(sid, from),
    instanceFor: (sid) => engines.instanceFor(sid),
    async handOver() {
      closed = true
      adoption.close()
      const ids = registry.ids()
      registry.releaseAll()
      await stores.leases.releaseLeases(ids, config.instanceId)
      if (ids.length) log.info({ sessions: ids.length }, 'handed sessions over')
    },
  }
}
