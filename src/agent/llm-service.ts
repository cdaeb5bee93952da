// The agent module's entry point: starts LLM turns (one at a time per session, later ones
// wait in a bounded line) and serves the conversation history.
import type { Logger } from 'pino'
import type { Config } from '../config.js'
import { AppError } from '../errors.js'
import type { DrivenLog, Executions } from '../sessions/index.js'
import type { Stores } from '../store/stores.js'
import { HistoryStore } from './history-store.js'
import { LlmBudgetError } from './errors.js'
import type { LlmBudget } from './llm-budget.js'
import type { LlmClient } from './llm-client.js'
import {
  DEFAULT_HISTORY_LENGTH,
  DEFAULT_MAX_ATTEMPTS,
  DEFAULT_MAX_STEPS,
  DEFAULT_MODEL_TIMEOUT_S,
  DEFAULT_OUTPUT_CHARS,
  DEFAULT_SUB_CALL_BUDGET,
  DEFAULT_TURN_TIMEOUT_S,
  TURN_QUEUE_DEPTH,
} from './limits.js'
import type { MessageRequestT, MessageT } from './schemas.js'
import type { SubCalls } from './sub-calls.js'
import { Turn } from './turn.js'

export interface LlmServiceDeps {
  config: Config
  executions: Executions
  /** Session records (whose conversation a tenant may read), and the connection its history is kept on. */
  stores: Pick<Stores, 'redis' | 'keys' | 'sessions'>
  log: Logger
  /** The model client; null when no endpoint is configured (turns then answer llm_not_configured). */
  llm: LlmClient | null
  subCalls: SubCalls
  /** The tenants' LLM budgets: a turn is refused (429) when its tenant has nothing left. */
  budget: LlmBudget
  /** Models a request may name. */
  allowedModels: ReadonlySet<string>
}

interface SessionLine {
  tail: Promise<void>
  waiting: number
}

/** The models a request may choose: REPLCAST_MODEL and the REPLCAST_MODELS list. */
export function allowedModels(config: Config): Set<string> {
  return new Set([
    config.REPLCAST_MODEL,
    ...config.REPLCAST_MODELS.split(',')
      .map((m) => m.trim())
      .filter(Boolean),
  ])
}

export class LlmService {
  private readonly history: HistoryStore
  private readonly lines = new Map<string, SessionLine>()
  private readonly turns = new Map<string, Turn>()
  private closing = false

  constructor(private readonly deps: LlmServiceDeps) {
    this.history = new HistoryStore(deps.stores.redis, deps.stores.keys)
  }

  /**
   * Starts a turn and returns its execution id once its first event is logged.
   * Throws AppError: llm_not_configured, model_not_allowed, limit_exceeded,
   * session_not_found, session_dead, queue_full, llm_budget_exhausted.
   */
  async startTurn(tenant: string, sid: string, body: MessageRequestT): Promise<string> {
    const { config, executions, allowedModels: allowed } = this.deps
    const llm = this.deps.llm
    if (!llm)
      throw new AppError(
        'llm_not_configured',
        'LLM turns need an OpenAI-compatible endpoint: set OPENAI_BASE_URL (and OPENAI_API_KEY if it needs one); code execution works without it',
      )
    if (this.closing) throw new AppError('unavailable', 'the service is shutting down')
    const model = body.model ?? config.REPLCAST_MODEL
    if (!allowed.has(model)) {
      throw new AppError('model_not_allowed', `model ${JSON.stringify(model)} is not allowed; choose one of: ${[...allowed].join(', ')}`, {
        extra: { allowed: [...allowed] },
      })
    }
    const timeoutS = body.timeout_s ?? Math.min(DEFAULT_TURN_TIMEOUT_S, config.MAX_EXEC_TIMEOUT_S)
    if (timeoutS > config.MAX_EXEC_TIMEOUT_S)
      throw new AppError('limit_exceeded', `timeout_s is above the allowed maximum of ${config.MAX_EXEC_TIMEOUT_S}`, {
        extra: { limit: 'timeout_s', maximum: config.MAX_EXEC_TIMEOUT_S },
      })
    const mode = body.mode ?? 'stream'
    const context = body.context // a string, list or object, in agent mode only: MessageRequest's schema checks both

    // A tenant whose LLM budget is spent is told so (429) before anything is written.
    await this.deps.budget.check(tenant).catch((err: unknown) => {
      if (!(err instanceof LlmBudgetError)) throw err
      throw new AppError('llm_budget_exhausted', err.message, { headers: { 'retry-after': String(err.retryAfterS) }, extra: { limit: err.what } })
    })

    // The place in the session's line of turns is taken before anything is awaited, so concurrent
    // requests see each other: one turn runs at a time, the rest wait, up to TURN_QUEUE_DEPTH.
    const line = this.lines.get(sid) ?? { tail: Promise.resolve(), waiting: 0 }
    if (line.waiting > TURN_QUEUE_DEPTH)
      throw new AppError('queue_full', `${line.waiting - 1} turns are already waiting in this session (the maximum is ${TURN_QUEUE_DEPTH})`)
    const behindTurn = line.waiting > 0
    line.waiting++
    this.lines.set(sid, line)
    const leave = () => {
      line.waiting--
      if (line.waiting === 0 && this.lines.get(sid) === line) this.lines.delete(sid)
    }
    let turnLog: DrivenLog
    try {
      turnLog = await executions.openLog(tenant, sid, behindTurn) // 404 / session_dead before anything is written
    } catch (err) {
      leave()
      throw err
    }

    const b = body.llm_budget ?? {}
    const turn = new Turn(
      {
        tenant,
        sid,
        mode,
        content: body.content,
        context,
        model,
        maxAttempts: body.max_attempts ?? DEFAULT_MAX_ATTEMPTS,
        maxSteps: body.max_steps ?? DEFAULT_MAX_STEPS,
        outputChars: body.output_chars ?? DEFAULT_OUTPUT_CHARS,
        timeoutMs: timeoutS * 1000,
        modelTimeoutMs: (body.model_timeout_s ?? DEFAULT_MODEL_TIMEOUT_S) * 1000,
        historyLength: body.max_history_length ?? DEFAULT_HISTORY_LENGTH,
        includeOutputs: body.include_outputs ?? true,
        budget: {
          max_calls: b.max_calls ?? DEFAULT_SUB_CALL_BUDGET.max_calls,
          max_concurrency: b.max_concurrency ?? DEFAULT_SUB_CALL_BUDGET.max_concurrency,
          timeout_s: b.timeout_s ?? DEFAULT_SUB_CALL_BUDGET.timeout_s,
          max_tokens: b.max_tokens ?? DEFAULT_SUB_CALL_BUDGET.max_tokens,
        },
      },
      { executions, history: this.history, llm, subCalls: this.deps.subCalls, budget: this.deps.budget, log: this.deps.log },
      turnLog,
    )

    // One turn at a time per session: the next starts when the previous has written its done.
    this.turns.set(turn.id, turn)
    const started = line.tail
      .then(() => turn.run())
      .catch((err: unknown) => this.deps.log.error({ err, turnId: turn.id }, 'turn crashed'))
      .finally(() => {
        this.turns.delete(turn.id)
        leave()
      })
    line.tail = started
    return turn.id
  }

  /** Interrupts a turn that is still going (its client went away and asked for that). No-op once it ended. */
  cancel(turnId: string, reason: string): void {
    this.turns.get(turnId)?.cancel(reason)
  }

  /** The session's conversation, oldest first (the newest `limit` messages). */
  async messages(tenant: string, sid: string, limit: number): Promise<MessageT[]> {
    const rec = await this.deps.stores.sessions.getSession(sid)
    if (!rec || rec.tenant !== tenant) throw new AppError('session_not_found', `no session ${sid}`)
    return (await this.history.recent(sid, limit)).map((e) => ({ ...e, created_at: new Date(e.created_at).toISOString() }))
  }

  /** Aborts every running turn's model calls (the service is closing). */
  close(): void {
    this.closing = true
    for (const t of this.turns.values()) t.abort()
  }
}
