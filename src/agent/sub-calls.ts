// llm_query/llm_batch from sandbox code: the REPL sends llm_request frames, the host calls
// the model within the budget of the turn (or plain execution) the frame belongs to, and
// answers with llm_response. A refused or failed call answers {error}, which the sandbox
// raises as LLMError with this message. Every call is also charged to the tenant's LLM budget,
// each attempt for what it may have cost: a retry, or a call abandoned while the model works, is spent.
import { setTimeout as pause } from 'node:timers/promises'
import type { Logger } from 'pino'
import { MAX_PROMPT_CHARS, type LlmRequestFrame } from '../repl/protocol.js'
import type { LlmReply, LlmRequestContext, LlmRequestHandler, RunningExecution } from '../sessions/index.js'
import { AgentError, LlmBudgetError, LlmError } from './errors.js'
import type { BudgetRequest, LlmBudget, Reservation } from './llm-budget.js'
import { estimateTokens, type LlmClient } from './llm-client.js'
import { DEFAULT_SUB_CALL_BUDGET, SUB_CALL_ATTEMPTS, SUB_CALL_MAX_TOKENS, type SubCallBudget } from './limits.js'

/** The running totals of one turn's sub-calls. */
export class SubCallAccount {
  calls = 0
  tokens = 0
  /** What of the tenant's budget ran out, once noted in the log with a `limit` event. */
  readonly limitsNoted = new Set<string>()
  private inFlight = 0
  private readonly waiting: Array<() => void> = []

  constructor(
    readonly budget: SubCallBudget,
    readonly defaultModel: string,
    readonly signal: AbortSignal,
  ) {}

  /** Waits for a concurrency slot; returns its release. */
  async slot(): Promise<() => void> {
    if (this.inFlight >= this.budget.max_concurrency) await new Promise<void>((r) => this.waiting.push(r))
    else this.inFlight++
    let released = false
    return () => {
      if (released) return
      released = true
      const next = this.waiting.shift()
      if (next)
        next() // the slot passes straight to the next waiter
      else this.inFlight--
    }
  }
}

const PLAIN_EXEC_ACCOUNTS_MAX = 1000

export class SubCalls implements LlmRequestHandler {
  /** Accounts of LLM turns, by the turn's log id (every step of a turn shares it). */
  private readonly accounts = new Map<string, SubCallAccount>()
  /** Accounts of plain executions (no turn), created on first use, oldest dropped first. */
  private readonly plain = new Map<string, { account: SubCallAccount; ac: AbortController }>()

  constructor(
    private readonly llm: LlmClient | null,
    private readonly allowedModels: ReadonlySet<string>,
    private readonly defaultModel: string,
    private readonly log: Logger,
    private readonly budget: LlmBudget,
  ) {}

  /** Routes sub-calls made by the steps of the turn whose log is `logId` to `account`. */
  register(logId: string, account: SubCallAccount): void {
    this.accounts.set(logId, account)
  }
  unregister(logId: string): void {
    this.accounts.delete(logId)
  }

  modelFor(logId: string): string {
    return (this.accounts.get(logId) ?? this.plain.get(logId)?.account)?.defaultModel ?? this.defaultModel
  }

  /** Never throws; always answers the frame. */
  handle(ctx: LlmRequestContext, frame: LlmRequestFrame): void {
    // Charged to the execution the session is running, never to an id the sandbox code chose.
    const running = ctx.running()
    if (!running || frame.exec_id !== running.id) {
      ctx.reply({ error: 'llm_query/llm_batch can only be called from the running execution' })
      return
    }
    void this.answer(frame, running, ctx.tenant).then(ctx.reply, (err: unknown) => {
      if (!(err instanceof AgentError)) this.log.warn({ err, sessionId: ctx.sessionId }, 'llm sub-call failed')
      ctx.reply({ error: err instanceof AgentError ? err.message : 'the model call failed (internal error)' })
    })
  }

  /**
   * A plain execution ended: its sub-calls still in flight are abandoned (nobody waits for them).
   * Each keeps its whole grant: the model may go on making the completion, and be paid for it.
   */
  executionEnded(execId: string): void {
    const p = this.plain.get(execId)
    if (!p) return
    p.ac.abort()
    this.plain.delete(execId)
  }

  private account(running: RunningExecution): SubCallAccount {
    const a = this.accounts.get(running.logId) ?? this.plain.get(running.id)?.account
    if (a) return a
    const ac = new AbortController()
    const fresh = new SubCallAccount(DEFAULT_SUB_CALL_BUDGET, this.defaultModel, ac.signal)
    this.plain.set(running.id, { account: fresh, ac })
    if (this.plain.size > PLAIN_EXEC_ACCOUNTS_MAX) this.executionEnded(this.plain.keys().next().value!)
    return fresh
  }

  /** Throws AgentError (budget_exhausted, bad_request, model_not_allowed, ...) or LlmError. */
  private async answer(frame: LlmRequestFrame, running: RunningExecution, tenant: string): Promise<LlmReply> {
    if (!this.llm) throw new AgentError('llm_not_configured', 'no LLM is configured for this service (OPENAI_BASE_URL is not set)')
    const prompts = frame.prompts
    if (!Array.isArray(prompts) || prompts.length === 0 || !prompts.every((p) => typeof p === 'string'))
      throw new AgentError('bad_request', 'llm_request needs a non-empty list of prompt strings')
    const tooLong = prompts.findIndex((p) => p.length > MAX_PROMPT_CHARS)
    if (tooLong >= 0) throw new AgentError('bad_request', `prompt ${tooLong} has ${prompts[tooLong]!.length} characters; the maximum is ${MAX_PROMPT_CHARS}`)
    const acct = this.account(running)
    const model = typeof frame.model === 'string' && frame.model ? frame.model : acct.defaultModel
    if (!this.allowedModels.has(model)) throw new AgentError('model_not_allowed', `model ${JSON.stringify(model)} is not on this service's allowlist`)
    const b = acct.budget
    if (acct.signal.aborted) throw new AgentError('turn_ended', 'the turn has ended')
    if (acct.calls + prompts.length > b.max_calls) {
      throw new AgentError(
        'budget_exhausted',
        `LLM call budget exhausted: this turn may send ${b.max_calls} prompts to the model; ${acct.calls} were sent and ${prompts.length} more were asked`,
      )
    }
    if (acct.tokens >= b.max_tokens)
      throw new AgentError('budget_exhausted', `LLM token budget exhausted: ${acct.tokens} of ${b.max_tokens} tokens used in this turn`)
    acct.calls += prompts.length
    // The tenant's budget is charged the batch's calls at once (all of it is sent or none), its tokens per prompt.
    await this.spend(acct, running, tenant, { calls: prompts.length, minTokens: 0, maxTokens: 0 }).catch((err: unknown) => {
      acct.calls -= prompts.length
      throw err
    })
    const texts = await Promise.all(prompts.map((p) => this.one(acct, running, tenant, model, p)))
    return texts.length === 1 ? { text: texts[0]!, texts } : { texts }
  }

  /** Reserves from the tenant's budget; a refusal is noted once per turn or execution with a `limit` event in its log. */
  private async spend(acct: SubCallAccount, running: RunningExecution, tenant: string, want: BudgetRequest): Promise<Reservation> {
    try {
      return await this.budget.reserve(tenant, want)
    } catch (err) {
      if (err instanceof LlmBudgetError && !acct.limitsNoted.has(err.what)) {
        acct.limitsNoted.add(err.what)
        running.note({ type: 'limit', what: err.what })
      }
      throw err
    }
  }

  /** One prompt: its first attempt and, after a failure worth retrying, more, each charged as a call of its own. */
  private async one(acct: SubCallAccount, running: RunningExecution, tenant: string, model: string, prompt: string): Promise<string> {
    const release = await acct.slot()
    try {
      for (let n = 1; ; n++) {
        try {
          // The first attempt's call was charged with its batch; a retry is one more.
          return await this.attempt(acct, running, tenant, model, prompt, n === 1 ? 0 : 1)
        } catch (err) {
          const wait = err instanceof LlmError ? err.retryAfterMs : null
          if (wait === null || n >= SUB_CALL_ATTEMPTS || acct.signal.aborted) throw perCallTimeout(err, acct)
          await pause(wait, undefined, { signal: acct.signal }).catch(() => undefined)
          if (acct.signal.aborted) throw err
        }
      }
    } finally {
      release()
    }
  }

  /** One request to the model: reserved from the turn's and the tenant's budgets, charged what it may have cost. */
  private async attempt(acct: SubCallAccount, running: RunningExecution, tenant: string, model: string, prompt: string, calls: number): Promise<string> {
    // Tokens are reserved before the call (the prompt's estimate plus the most the reply may use),
    // so calls running side by side cannot together overshoot the budget; the real use replaces it.
    const need = estimateTokens(prompt.length)
    const left = acct.budget.max_tokens - acct.tokens
    if (need >= left)
      throw new AgentError(
        'budget_exhausted',
        `LLM token budget exhausted: this prompt needs about ${need} tokens and ${Math.max(0, left)} of ${acct.budget.max_tokens} are left in this turn`,
      )
    const asked = need + Math.max(1, Math.min(SUB_CALL_MAX_TOKENS, left - need))
    acct.tokens += asked
    let spend: Reservation
    try {
      // The tenant's budget may grant less than the turn's: the completion asked for shrinks to fit.
      spend = await this.spend(acct, running, tenant, { calls, minTokens: need + 1, maxTokens: asked })
    } finally {
      acct.tokens -= asked
    }
    acct.tokens += spend.tokens
    // What the call costs: the use the model reports; without it, a whole reply its estimate, a call
    // refused before anything was made (HTTP 4xx, never connected) its prompt's, and one that left
    // and then failed or was abandoned (timeout, the execution ended) its whole grant.
    let charged = spend.tokens
    try {
      const { text, usage } = await this.llm!.complete([{ role: 'user', content: prompt }], {
        model,
        signal: acct.signal,
        idleTimeoutMs: acct.budget.timeout_s * 1000,
        maxTokens: spend.tokens - need,
      })
      charged = usage?.total_tokens ?? estimateTokens(prompt.length + text.length)
      return text
    } catch (err) {
      if (err instanceof LlmError && !err.spendUnknown) charged = need
      throw err
    } finally {
      acct.tokens += charged - spend.tokens
      void spend.settle(charged)
    }
  }
}

/** A timeout, said in the terms of the sub-call's budget. */
function perCallTimeout(err: unknown, acct: SubCallAccount): unknown {
  if (err instanceof LlmError && err.kind === 'timeout')
    return new LlmError(`the model did not answer within ${acct.budget.timeout_s} s (the per-call timeout)`, 'timeout', { cause: err })
  return err
}
