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

export function encodeFrame(type: string, fields: Record<string, unknown>): string {
  // JSON.stringify never emits raw newlines, and the REPL accepts non-ASCII JSON.
  return JSON.stringify({ v: PROTOCOL_VERSION, type, ...fields }) + '\n'
}
