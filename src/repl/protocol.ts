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

export interface LlmRequestFrame extends ReplFrame {
  type: 'llm_request'
  id: string
  exec_id: string
  prompts: string[]
  model?: string | null
}

export function encodeFrame(type: string, fields: Record<string, unknown>): string {
  // JSON.stringify never emits raw newlines, and the REPL accepts non-ASCII JSON.
  return JSON.stringify({ v: PROTOCOL_VERSION, type, ...fields }) + '\n'
}
