// The REPL wire protocol (DESIGN.md §3, sandbox-image/README.md): NDJSON frames, v1.
export const PROTOCOL_VERSION = 1
/** Longest frame line accepted from a sandbox (images travel base64 in one frame). */
export const MAX_FRAME_BYTES = 16 * 1024 * 1024

export interface ReplFrame {
  v: number
  type: string
  seq?: number
  exec_id?: string | null
  reply_to?: string
  [k: string]: unknown
}

/** The frames that belong to an execution and end up in its event log. */
export const EXECUTION_FRAME_TYPES = new Set(['status', 'stream', 'result', 'display', 'error', 'llm_request', 'final', 'limit', 'done'])

export interface LlmRequestFrame extends ReplFrame {
  type: 'llm_request'
  id: string
  exec_id: string
  prompts: string[]
  model?: string | null
}

export interface DoneFrame extends ReplFrame {
  type: 'done'
  exec_id: string
  status: 'ok' | 'error' | 'interrupted'
  execution_count: number
  duration_ms: number
}

export function encodeFrame(type: string, fields: Record<string, unknown>): string {
  // JSON.stringify never emits raw newlines, and the REPL accepts non-ASCII JSON.
  return JSON.stringify({ v: PROTOCOL_VERSION, type, ...fields }) + '\n'
}
