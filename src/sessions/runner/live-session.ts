// A session this instance is attached to: its REPL channel and where it is in its life here.
import type { ReplClient } from '../../repl/repl-client.js'
import type { PendingExecution } from './execution.js'

/**
 * attached: this instance drives the session. stopping: the host itself is ending the sandbox
 * (restart, delete, its exit was seen), so the channel closing is expected. released: let go
 * (detached, replaced, deleted, or the service closed); nothing here acts on it any more.
 */
type LiveState = 'attached' | 'stopping' | 'released'

/** The runner's state of a session's executions; only ExecutionRunner reads or changes it. */
interface SessionWork {
  queue: PendingExecution[]
  running: PendingExecution | null
  /** Submits between their checks and their place in the queue (their Redis writes are in flight). */
  reserved: number
}

export interface LiveSession {
  readonly id: string
  readonly tenant: string
  readonly containerId: string
  /** The lease term this instance attached under: its writes for the session carry it, and Redis refuses them once the lease has passed to another (store/lease-store.ts). */
  readonly term: string
  readonly client: ReplClient
  state: LiveState
  readonly idleTimeoutS: number
  readonly outputBytes: number
  readonly work: SessionWork
}
