// The sessions layer's public face: one factory that wires its parts, the two services the HTTP
// routes and the agent use (SessionService for lifecycle, Executions for running code and reading
// events), and start/close for the app's hooks.
import type { Logger } from 'pino'
import type { Config } from '../config.js'
import type { SandboxDriver } from '../sandbox/driver.js'
import type { EventFeed } from '../store/event-feed.js'
import { EngineStore } from '../store/engine-store.js'
import { PoolStore } from '../store/pool-store.js'
import type { RedisStore } from '../store/redis-store.js'
import { Adoption } from './adoption.js'
import { DrivenLogs } from './driven-logs.js'
import { Engines } from './engines.js'
import { ExecutionRunner } from './execution-runner.js'
import { Executions } from './executions.js'
import { HostCapacity } from './host-capacity.js'
import type { LlmRequestHandler } from './llm-requests.js'
import type { Metrics } from './metrics.js'
import { Reaper } from './reaper.js'
import { RecordedExecutions } from './recorded-executions.js'
import { OneShots } from './one-shot.js'
import { WarmPool } from './pool.js'
import { PoolSweep } from './pool-sweep.js'
import { SessionRegistry } from './registry.js'
import { SandboxSource } from './sandbox-source.js'
import { SessionService } from './session-service.js'
import { SessionFiles } from './files.js'
import { TemplateImages } from './template-images.js'

export type { SessionService } from './session-service.js'
export type { Engines } from './engines.js'
export type { SessionFiles } from './files.js'
export type { OneShots } from './one-shot.js'
export type { TemplateImages } from './template-images.js'
export type { ExecutionRead, Executions, StreamedRun } from './executions.js'
export type { DrivenLog } from './driven-logs.js'
export type { EventPayload } from './execution.js'
export type { LlmReply, LlmRequestContext, LlmRequestHandler, RunningExecution } from './llm-requests.js'

export interface SessionLayerDeps {
  config: Config
  store: RedisStore
  feed: EventFeed
  driver: SandboxDriver
  log: Logger
  metrics: Metrics
  /** Answers sandbox code's llm_query/llm_batch; without it they fail with a clear error. */
  llmRequests?: LlmRequestHandler
}

export interface SessionLayer {
  sessions: SessionService
  executions: Executions
  /** POST /v1/execute: code in a fresh sandbox (from the warm pool), removed after its `done`. */
  oneShots: OneShots
  /** A session's /workspace files (also `files.write(sessionId, path, data)` for one-shot input files). */
  files: SessionFiles
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
  const { config, store, feed, driver, log, metrics } = deps
  // The runner lets go of a session it cannot go on with through adoption (built below, called later).
  const runner = new ExecutionRunner({ ...deps, letGo: (live, why) => void adoption.letGo(live, why) })
  const registry = new SessionRegistry(runner, metrics)
  const recorded = new RecordedExecutions(config, store, feed)
  const driven = new DrivenLogs(store, feed)
  const capacity = new HostCapacity(driver.memory, config.HOST_MEMORY_SHARE, log)
  const engines = new Engines({ config, driver, capacity, store: new EngineStore(store), log: log.child({ component: 'engines' }), records: store })
  const adoption = new Adoption({ config, store, driver, log, registry, runner, recorded, driven, llmRequests: deps.llmRequests, engines })
  const templates = new TemplateImages(config, driver, log)
  const poolStore = new PoolStore(store)
  const pool = new WarmPool({ config, driver, log: log.child({ component: 'pool' }), metrics, capacity, templates, poolStore })
  const poolSweep = new PoolSweep({ config, driver, log, pool, poolStore, engines })
  const sandboxes = new SandboxSource({ config, driver, capacity, templates, pool })
  const sessions = new SessionService({ config, store, driver, log, metrics, registry, runner, adoption, recorded, sandboxes, engines })
  const executions = new Executions({ config, store, feed, sessions, registry, adoption, runner, driven })
  const workspace = driver.workspaceFiles(config.SANDBOX_USER, config.FILE_STALL_TIMEOUT_MS)
  const files = new SessionFiles({ config, store, sessions, files: workspace, log: log.child({ component: 'files' }), engines })
  const oneShots = new OneShots({ config, sessions, executions, files, pool, log })
  const reaper = new Reaper({ config, store, driver, log, metrics, registry, sessions, adoption, runner, recorded, driven, engines })
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
    executions,
    oneShots,
    files,
    templates,
    engines,
    async start() {
      await engines.start()
      await reaper.removeOrphans()
      await poolSweep.sweep().catch((err: unknown) => log.warn({ err }, 'the warm-pool sweep failed at start; it runs again soon'))
      await adoption.readoptAll()
      every(config.REAPER_INTERVAL_MS, () => reaper.reapDue())
      every(Math.floor(config.LEASE_TTL_MS / 3), () => adoption.renewLeases())
      every(Math.floor(config.LEASE_TTL_MS / 3), () => pool.heartbeat())
      every(Math.floor(config.LEASE_TTL_MS / 3), () => engines.report())
      every(config.LEASE_TTL_MS, () => poolSweep.sweep())
      await pool.start()
      void templates.checkAll()
    },
    async close() {
      closed = true
      for (const t of timers) clearInterval(t)
      registry.releaseAll()
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
      await store.releaseLeases(ids, config.instanceId)
      if (ids.length) log.info({ sessions: ids.length }, 'handed sessions over')
    },
  }
}
