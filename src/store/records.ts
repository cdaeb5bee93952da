// The records the store keeps in Redis hashes (sessions, executions, processes, logged events) and their
// codec: JSON for nested fields, numbers for numeric ones, '' for null.
export interface SessionRecord {
  id: string
  tenant: string
  status: 'starting' | 'ready' | 'busy' | 'hibernated' | 'dead'
  created_at: number
  last_active_at: number
  idle_timeout_s: number
  runtime: 'runc' | 'runsc'
  limits: { memory_mb: number; cpus: number; pids: number; workspace_mb: number; output_bytes: number }
  metadata: Record<string, string>
  env: Record<string, string>
  container_id: string
  execution_count: number
  /** The sandbox template it was started from (absent in records from before templates: "default"). */
  template?: string
  /** The Docker engine (its `docker info` ID) running its sandbox; absent in records from before engines were recorded. */
  engine?: string
  /** What happens at the idle deadline (absent in records from before hibernation: delete). */
  idle_action?: 'delete' | 'hibernate'
  /** How long it stays hibernated before it is deleted with its checkpoint. */
  hibernated_ttl_s?: number
  /** When it was hibernated (null or absent: it is not). */
  hibernated_at?: number | null
  /** The sha256 of its checkpoint's files, checked before the restore; '' or absent: it has none. */
  checkpoint_digest?: string
  checkpoint_bytes?: number | null
  /** Set while this instance checkpoints it: a sandbox found stopped then was lost mid-checkpoint. */
  hibernating_at?: number | null
  /** Why a dead session is dead, when that is more than "its sandbox stopped" (e.g. no API instance is left on its engine). */
  status_detail?: string
}

export interface ExecutionRecord {
  id: string
  session_id: string
  tenant: string
  status: string
  created_at: number
  started_at: number | null
  ended_at: number | null
  duration_ms: number | null
  execution_count: number | null
  /** What is needed to run it again after an API restart while it waited in the queue. */
  /** execute: code; stream: code streamed in (an LLM step); turn: an LLM turn, driven by its instance only. */
  kind?: 'execute' | 'stream' | 'turn'
  code?: string
  /** bash for a bash script; absent for Python. */
  language?: 'bash'
  timeout_ms?: number
}

/** A background process (src/store/process-store.ts); its output is the event log `events(sid, id)`. */
export interface ProcessRecord {
  id: string
  session_id: string
  tenant: string
  command: string
  /** As the request gave it ('' for /workspace). */
  cwd: string
  status: 'running' | 'exited'
  /** Its exit status (128 + N when signal N ended it); null while it runs, or when it ended with its sandbox. */
  exit_code: number | null
  started_at: number
  ended_at: number | null
}

export interface LoggedEvent {
  id: string
  type: string
  [k: string]: unknown
}

const JSON_FIELDS = new Set(['limits', 'metadata', 'env'])
const NUM_FIELDS = new Set([
  'timeout_ms',
  'created_at',
  'last_active_at',
  'idle_timeout_s',
  'execution_count',
  'started_at',
  'ended_at',
  'duration_ms',
  'exit_code',
  'hibernated_ttl_s',
  'hibernated_at',
  'checkpoint_bytes',
  'hibernating_at',
])

export function toHash(obj: object): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [k, v] of Object.entries(obj)) {
    if (v === undefined) continue
    out[k] = JSON_FIELDS.has(k) ? JSON.stringify(v) : v === null ? '' : String(v)
  }
  return out
}

export function fromHash<T>(h: Record<string, string>): T {
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(h)) {
    if (JSON_FIELDS.has(k)) out[k] = JSON.parse(v)
    else if (NUM_FIELDS.has(k)) out[k] = v === '' ? null : Number(v)
    else out[k] = v
  }
  return out as T
}
