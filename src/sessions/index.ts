// The sessions layer's public face: one factory that wires its parts, the two services the HTTP
// routes and the agent use (SessionService for lifecycle, Executions for running code and reading
// events), and start/close for the app's hooks.
import type { Logger } from 'pino'
import type { Config } from '../config.js'
import type { DockerSandboxDriver } from '../sandbox/docker-driver.js'
import type { EventFeed } from '../store/event-feed.js'
import type { RedisStore } from '../store/redis-store.js'
import { Adoption } from './adoption.js'
import { DrivenLogs } from './driven-logs.js'
import { ExecutionRunner } from './execution-runner.js'
import { Executions } from './executions.js'
import type { LlmRequestHandler } from './llm-requests.js'
import type { Metrics } from './metrics.js'
import { Reaper } from './reaper.js'
import { RecordedExecutions } from './recorded-executions.js'
import { SessionRegistry } from './registry.js'
import { SessionService } from './session-service.js'

export type { SessionService } from './session-service.js'
export type { Executions, StreamedRun } from './executions.js'
export type { DrivenLog } from './driven-logs.js'
export type { EventPayload } from './execution.js'
export type { LlmReply, LlmRequestContext, LlmRequestHandler } from './llm-requests.js'

export interface SessionLayerDeps {
  config: Config
  store: RedisStore
  feed: EventFeed
  driver: DockerSandboxDriver
  log: Logger
  metrics: Metrics
  /** Answers sandbox code's llm_query/llm_batch; without it they fail with a clear error. */
  llmRequests?: LlmRequestHandler
}

export interface SessionLayer {
  sessions: SessionService
  executions: Executions
  /** Removes leftover containers, re-adopts this instance's sessions, starts the reaper and lease renewal. */
  start(): Promise<void>
  /** Stops background work and detaches from every sandbox (they keep running, for re-adoption). */
  close(): void
  /** Sessions attached to this instance. */
  attachedCount(): number
}

export function createSessionLayer(deps: SessionLayerDeps): SessionLayer {
  const { config, store, feed, driver, log, metrics } = deps
  const runner = new ExecutionRunner(deps)
  const registry = new SessionRegistry(runner, metrics)
  const recorded = new RecordedExecutions(config, store, feed)
  const driven = new DrivenLogs(store, feed)
  const adoption = new Adoption({ config, store, driver, log, registry, runner, recorded, driven, llmRequests: deps.llmRequests })
  const sessions = new SessionService({ config, store, driver, log, metrics, registry, runner, adoption, recorded })
  const executions = new Executions({ config, store, feed, sessions, registry, adoption, runner, driven })
  const reaper = new Reaper({ config, store, driver, log, metrics, registry, sessions, adoption })
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
    async start() {
      await reaper.removeOrphans()
      await adoption.readoptAll()
      every(config.REAPER_INTERVAL_MS, () => reaper.reapDue())
      every(Math.floor(config.LEASE_TTL_MS / 3), () => adoption.renewLeases())
    },
    close() {
      closed = true
      for (const t of timers) clearInterval(t)
      registry.releaseAll()
    },
    attachedCount: () => registry.size,
  }
}
