// Prometheus metrics of one app instance (its own registry, so tests can build many apps).
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'

/** What the checkpoints on this instance's disk hold, read when /metrics is (set by the sessions layer). */
interface CheckpointUsageSource {
  read: (() => Promise<{ checkpoints: number; bytes: number }>) | null
}

/** Every tenant's snapshots and their bytes, read from Redis when /metrics is (set by the sessions layer). */
interface SnapshotUsageSource {
  read: (() => Promise<{ snapshots: number; bytes: number }>) | null
}

/** How long a scrape waits for a source: /metrics answers while Redis or the disk is slow or away. */
const SOURCE_WAIT_MS = 1000

/**
 * What `source.read` answers within SOURCE_WAIT_MS; undefined when it fails or is late (the gauge
 * keeps its last value). Gauges that show one source share a read while it is in flight: a scrape
 * collects every gauge at once, so it reads each source once.
 */
function sharedRead<T>(source: { read: (() => Promise<T>) | null }): () => Promise<T | undefined> {
  let inFlight: Promise<T | undefined> | null = null
  return () => {
    if (!source.read) return Promise.resolve(undefined)
    inFlight ??= within(source.read(), SOURCE_WAIT_MS).finally(() => {
      inFlight = null
    })
    return inFlight
  }
}

async function within<T>(read: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms)
  })
  try {
    return await Promise.race([read.catch(() => undefined), late])
  } finally {
    clearTimeout(timer)
  }
}

export function createMetrics() {
  const registry = new Registry()
  collectDefaultMetrics({ register: registry })
  const checkpointUsage: CheckpointUsageSource = { read: null }
  const snapshotUsage: SnapshotUsageSource = { read: null }
  const readCheckpoints = sharedRead(checkpointUsage)
  const readSnapshots = sharedRead(snapshotUsage)
  return {
    checkpointUsage,
    snapshotUsage,
    registry,
    /** Set by the session registry. */
    sessionsAttached: new Gauge({ name: 'replcast_sessions_attached', help: 'Sessions attached to this instance', registers: [registry] }),
    sessionCreateSeconds: new Histogram({
      name: 'replcast_session_create_seconds',
      help: 'Time to create a session until its REPL is ready',
      registers: [registry],
      buckets: [0.1, 0.25, 0.5, 1, 2, 5, 10, 30],
    }),
    hibernateSeconds: new Histogram({
      name: 'replcast_session_hibernate_seconds',
      help: 'Time to hibernate a session (checkpoint, seal, container removal)',
      registers: [registry],
      buckets: [0.1, 0.25, 0.5, 1, 2, 5, 10, 30],
    }),
    wakeSeconds: new Histogram({
      name: 'replcast_session_wake_seconds',
      help: 'Time to wake a hibernated session until its REPL answers',
      registers: [registry],
      buckets: [0.1, 0.25, 0.5, 1, 2, 5, 10, 30],
    }),
    hibernatedSessions: new Gauge({
      name: 'replcast_hibernated_sessions',
      help: "Checkpoints on this instance's disk (CHECKPOINT_DIR): hibernated sessions', and refused ones kept for their dead session",
      registers: [registry],
      async collect() {
        const usage = await readCheckpoints()
        if (usage) this.set(usage.checkpoints)
      },
    }),
    snapshots: new Gauge({
      name: 'replcast_snapshots',
      help: 'Snapshots kept (every tenant, every instance)',
      registers: [registry],
      async collect() {
        const usage = await readSnapshots()
        if (usage) this.set(usage.snapshots)
      },
    }),
    snapshotBytes: new Gauge({
      name: 'replcast_snapshot_bytes',
      help: "Bytes of the snapshots' checkpoints (every tenant)",
      registers: [registry],
      async collect() {
        const usage = await readSnapshots()
        if (usage) this.set(usage.bytes)
      },
    }),
    checkpointBytes: new Gauge({
      name: 'replcast_checkpoint_bytes',
      help: "Bytes of hibernated sessions' checkpoints on this instance's disk",
      registers: [registry],
      async collect() {
        const usage = await readCheckpoints()
        if (usage) this.set(usage.bytes)
      },
    }),
    sessionsReaped: new Counter({ name: 'replcast_sessions_reaped_total', help: 'Idle sessions reaped by this instance', registers: [registry] }),
    /** Set by the warm pool (pool.ts). */
    poolSandboxes: new Gauge({
      name: 'replcast_pool_sandboxes',
      help: "This instance's warm-pool sandboxes, by state (ready: waiting to be taken; starting: being made)",
      labelNames: ['state'],
      registers: [registry],
    }),
    poolTakes: new Counter({
      name: 'replcast_pool_takes_total',
      help: 'Requests that matched the warm pool, by result (hit: got a pooled sandbox; miss: none was ready, made cold; discarded: a pooled sandbox found dead and removed)',
      labelNames: ['result'],
      registers: [registry],
    }),
    poolCreateFailures: new Counter({
      name: 'replcast_pool_create_failures_total',
      help: 'Warm-pool sandboxes that could not be made or died while waiting (refills back off after each)',
      registers: [registry],
    }),
    redisReadRetries: new Counter({
      name: 'replcast_redis_read_retries_total',
      help: "Reads of an execution's events tried again because Redis could not answer (a reader waiting through a Redis restart or failover)",
      registers: [registry],
    }),
    redisWriteRetries: new Counter({
      name: 'replcast_redis_write_retries_total',
      help: "Writes retried because Redis failed (an execution's end)",
      registers: [registry],
    }),
    executionsQueued: new Counter({ name: 'replcast_executions_submitted_total', help: 'Executions accepted', registers: [registry] }),
    executions: new Counter({ name: 'replcast_executions_total', help: 'Executions ended, by done status', labelNames: ['status'], registers: [registry] }),
    executionSeconds: new Histogram({
      name: 'replcast_execution_seconds',
      help: 'Execution wall time',
      registers: [registry],
      buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120, 600],
    }),
    httpSeconds: new Histogram({
      name: 'replcast_http_request_seconds',
      help: 'HTTP request latency (SSE: until the stream ends)',
      labelNames: ['method', 'route', 'status'],
      registers: [registry],
      buckets: [0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30],
    }),
  }
}

export type Metrics = ReturnType<typeof createMetrics>
