// Conversation history of a session: a capped Redis list (the store's `history` key), one
// JSON entry per message. Deleted with the session (SessionStore.deleteSession removes the key).
import type { Redis } from 'ioredis'
import type { RedisKeys } from '../store/keys.js'
import { HISTORY_ENTRY_CHARS, HISTORY_KEEP, truncate } from './limits.js'

export interface HistoryEntry {
  role: 'user' | 'assistant'
  /** The user's message, or the code the model wrote (what ran). */
  content: string
  mode: 'stream' | 'agent'
  /** The turn's execution id (its events: GET /v1/sessions/{id}/executions/{turn_id}). */
  turn_id: string
  created_at: number
  /** assistant: what the code printed, truncated. */
  output?: string
  /** assistant, agent mode: the final answer. */
  final?: string
  /** assistant: how the turn ended. */
  status?: string
  model?: string
}

export class HistoryStore {
  constructor(
    private readonly redis: Redis,
    private readonly keys: RedisKeys,
  ) {}

  /** Appends entries and trims the list to the newest HISTORY_KEEP. */
  async append(sid: string, entries: HistoryEntry[]): Promise<void> {
    if (!entries.length) return
    const key = this.keys.history(sid)
    const bounded = entries.map((e) => ({
      ...e,
      content: truncate(e.content, HISTORY_ENTRY_CHARS),
      ...(e.output !== undefined ? { output: truncate(e.output, HISTORY_ENTRY_CHARS) } : {}),
      ...(e.final !== undefined ? { final: truncate(e.final, HISTORY_ENTRY_CHARS) } : {}),
    }))
    // Only while the session exists: a turn ending after DELETE must not resurrect its history.
    const exists = await this.redis.exists(this.keys.session(sid))
    if (!exists) return
    await this.redis
      .multi()
      .rpush(key, ...bounded.map((e) => JSON.stringify(e)))
      .ltrim(key, -HISTORY_KEEP, -1)
      .exec()
  }

  /** The newest `limit` entries, oldest first. */
  async recent(sid: string, limit: number): Promise<HistoryEntry[]> {
    if (limit <= 0) return []
    const rows = await this.redis.lrange(this.keys.history(sid), -limit, -1)
    const out: HistoryEntry[] = []
    for (const r of rows) {
      try {
        out.push(JSON.parse(r) as HistoryEntry)
      } catch {
        /* a corrupt entry is skipped */
      }
    }
    return out
  }
}
