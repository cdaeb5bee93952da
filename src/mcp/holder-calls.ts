// Which replcast session a POST /mcp body needs the holder of: its tools/call requests of tools
// marked `holder` (they use the session's sandbox) name it, so http/mcp-routing.ts can pass the
// request to the instance holding that session, as the REST routes that name it in their path are.
import { TOOLS } from './tools.js'

const HOLDER_TOOLS = new Set(TOOLS.filter((def) => def.holder).map((def) => def.name))

interface MaybeCall {
  method?: unknown
  params?: { name?: unknown; arguments?: { session_id?: unknown } | null } | null
}

/**
 * The session whose sandbox `message` (one JSON-RPC message, or a batch) needs; null when none
 * does, or when a batch names several sessions. Such a batch is answered where it arrived, as
 * before: its calls for a session held by another instance get session_moving results (clients
 * send one call per request; batches left the MCP specification in 2025-06-18).
 */
export function sessionOfCalls(message: unknown): string | null {
  const sids = new Set<string>()
  for (const m of Array.isArray(message) ? (message as unknown[]) : [message]) {
    if (typeof m !== 'object' || m === null) continue
    const { method, params } = m as MaybeCall
    if (method !== 'tools/call' || typeof params?.name !== 'string' || !HOLDER_TOOLS.has(params.name)) continue
    const sid = params.arguments?.session_id
    if (typeof sid === 'string') sids.add(sid)
  }
  return sids.size === 1 ? [...sids][0]! : null
}
