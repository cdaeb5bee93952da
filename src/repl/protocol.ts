// The REPL wire protocol (sandbox-image/README.md describes every frame): NDJSON frames, v1.
export const PROTOCOL_VERSION = 1
/** Longest frame line accepted from a sandbox (images travel base64 in one frame). */
export const MAX_FRAME_BYTES = 16 * 1024 * 1024
/** Longest llm_query/llm_batch prompt accepted from sandbox code, in characters. */
export const MAX_PROMPT_CHARS = 1_000_000

export interface ReplFrame {
  v: number
  type: string
  seq?: number
  exec_id?: string | null
  reply_to?: string
  [k: string]: unknown
}

export interface LlmRequestFrame extends ReplFrame {
  type: 'llm_request'
  id: string
  exec_id: string
  prompts: string[]
  model?: string | null
}

/**
 * A background process's frames (sandbox-image/replcast_repl/processes.py): numbered per process by
 * `pos` (1, 2, ...), routed by `proc_id`, never by exec_id.
 */
export interface ProcessFrame extends ReplFrame {
  type: 'proc_output' | 'proc_limit' | 'proc_exit'
  proc_id: string
  pos: number
}

const PROCESS_FRAME_TYPES = new Set(['proc_output', 'proc_limit', 'proc_exit'])

/** Whether a frame is a background process's (its type, a string proc_id and a numeric pos). */
export function isProcessFrame(f: ReplFrame): f is ProcessFrame {
  return PROCESS_FRAME_TYPES.has(f.type) && typeof f.proc_id === 'string' && Number.isSafeInteger(f.pos)
}

export function encodeFrame(type: string, fields: Record<string, unknown>): string {
  // JSON.stringify never emits raw newlines, and the REPL accepts non-ASCII JSON.
  return JSON.stringify({ v: PROTOCOL_VERSION, type, ...fields }) + '\n'
}
