// One LLM turn. A turn is an execution of its own (a DrivenLog) whose events the client follows;
// its work runs as one or more streamed REPL executions ("steps") in the session's queue, each
// writing its events straight into the turn's log. Each step's model tokens are pumped into the
// REPL as they arrive (code events first, so they precede the output they cause). Between steps
// the host decides: self-correct (stream mode), continue (agent mode) or stop. The turn's log
// ends with exactly one `done`, whatever happens.
import type { Logger } from 'pino'
import { untilAborted } from '../abort.js'
import { AppError } from '../errors.js'
import type { DoneStatusT } from '../schemas.js'
import type { DrivenLog, EventPayload, Executions, StreamedRun } from '../sessions/index.js'
import { CodeFilter } from './code-filter.js'
import { CodeRelay } from './code-relay.js'
import { AgentError, LlmBudgetError, LlmError } from './errors.js'
import type { LlmBudget } from './llm-budget.js'
import { estimateTokens, type ChatMessage, type LlmClient } from './llm-client.js'
import type { HistoryEntry, HistoryStore } from './history-store.js'
import { AGENT_SYSTEM_PROMPT, STREAM_SYSTEM_PROMPT, agentTaskMessage, correctionMessage, historyMessages, stepMessage, type StepOutput } from './prompts.js'
import { REPLY_MAX_TOKENS, REPLY_MIN_TOKENS, type SubCallBudget } from './limits.js'
import { StepCollector } from './step-collector.js'
import { SubCallAccount, type SubCalls } from './sub-calls.js'

const SET_VAR_TIMEOUT_MS = 60_000
/** Ends a broken reply: `$` is not Python anywhere outside a string, so what precedes it cannot run as a statement. */
const POISON_LINE = '\n$\n'

export interface TurnParams {
  tenant: string
  sid: string
  mode: 'stream' | 'agent'
  content: string
  context: unknown
  model: string
  maxAttempts: number
  maxSteps: number
  outputChars: number
  timeoutMs: number
  modelTimeoutMs: number
  historyLength: number
  includeOutputs: boolean
  budget: SubCallBudget
}

export interface TurnDeps {
  executions: Executions
  history: HistoryStore
  llm: LlmClient
  subCalls: SubCalls
  /** The tenant's LLM budget, which every model reply of the turn is charged to. */
  budget: LlmBudget
  log: Logger
}

interface StepResult {
  status: DoneStatusT | null
  code: string
  output: StepOutput
  final: string | undefined
  llmError: LlmError | null
}

export class Turn {
  /** Aborts model calls and sub-calls; set when the turn ends or the service closes. */
  private readonly ac = new AbortController()
  private cancelReason: string | null = null
  private runningStep: StreamedRun | null = null
  /** When it began running (a turn waiting behind another is not on the clock yet). */
  private startedAt = Date.now()
  private firstStepStarted = false
  /** llm_query/llm_batch budget of the whole turn, shared by all its steps. */
  private readonly account: SubCallAccount

  constructor(
    private readonly p: TurnParams,
    private readonly deps: TurnDeps,
    private readonly turnLog: DrivenLog,
  ) {
    this.account = new SubCallAccount(p.budget, p.model, this.ac.signal)
    // An interrupt of the session between two steps ends the turn (a turn still waiting is left alone).
    turnLog.onInterrupt(() => {
      if (!this.firstStepStarted) return false
      this.cancel('interrupted by the client')
      return true
    })
  }

  get id(): string {
    return this.turnLog.id
  }

  /** Ends the turn early (client gone, interrupt, service closing): interrupts the running step. */
  cancel(reason: string): void {
    if (this.cancelReason) return
    this.cancelReason = reason
    if (this.runningStep && !this.runningStep.ended) this.runningStep.interrupt()
  }

  /** Aborts everything without waiting for the REPL (the service is closing). */
  abort(): void {
    this.cancel('the service is shutting down')
    this.ac.abort()
  }

  private appendTurn(e: EventPayload): Promise<string> {
    return this.turnLog.append(e)
  }

  /** Runs the turn to its end. Never throws; writes exactly one `done`. */
  async run(): Promise<void> {
    this.startedAt = Date.now()
    const p = this.p
    const log = this.deps.log.child({ sessionId: p.sid, turnId: this.id })
    let status: DoneStatusT = 'error'
    const code: string[] = []
    const outputs: string[] = []
    let final: string | undefined
    this.deps.subCalls.register(this.id, this.account)
    try {
      const messages = await this.initialMessages()
      for (let n = 1; ; n++) {
        if (this.cancelReason) {
          await this.appendTurn(cancelError(this.cancelReason))
          status = 'interrupted'
          break
        }
        const remaining = this.startedAt + p.timeoutMs - Date.now()
        if (remaining <= 0) {
          await this.appendTurn({ type: 'error', ename: 'TimeoutError', evalue: `the turn used its ${p.timeoutMs / 1000} s`, traceback: [] })
          status = 'timeout'
          break
        }
        const r = await this.step(n, messages, remaining)
        if (r.code) code.push(r.code)
        if (r.output.output) outputs.push(r.output.output)
        if (r.final !== undefined) final = r.final
        if (r.llmError) {
          status = 'error'
          break
        }
        if (r.status === null) {
          status = 'killed'
          break
        } // the service is closing
        if (r.status !== 'ok' && r.status !== 'error') {
          if (this.cancelReason && r.status === 'interrupted') await this.appendTurn(cancelError(this.cancelReason))
          status = r.status
          break
        }
        const next = this.next(n, r, final, messages)
        if (next === 'continue') continue
        if (next.error) await this.appendTurn(next.error)
        status = next.status
        break
      }
    } catch (err) {
      log.warn({ err }, 'turn failed')
      // Only our own errors carry messages written for the client.
      const message = err instanceof AppError || err instanceof AgentError ? err.message : 'the turn could not continue (internal error)'
      await this.appendTurn({ type: 'error', ename: 'ReplcastError', evalue: message, traceback: [] }).catch(() => undefined)
      status = 'error'
    } finally {
      this.ac.abort()
      this.deps.subCalls.unregister(this.id)
    }
    await this.finish(status, code, outputs, final, log)
  }

  /** After a step that ended ok or with an error: 'continue' (the follow-up is pushed onto `messages`), or how the turn ends. */
  private next(n: number, r: StepResult, final: string | undefined, messages: ChatMessage[]): 'continue' | { status: DoneStatusT; error?: EventPayload } {
    const p = this.p
    if (p.mode === 'stream') {
      if (r.status === 'ok') return { status: 'ok' }
      if (n >= p.maxAttempts) return { status: 'error' }
      messages.push(
        { role: 'assistant', content: r.code || '# (no code)' },
        { role: 'user', content: correctionMessage(r.output, n, p.maxAttempts, p.outputChars) },
      )
      return 'continue'
    }
    if (final !== undefined) return { status: 'ok' }
    if (n >= p.maxSteps)
      return {
        status: 'error',
        error: { type: 'error', ename: 'MaxStepsExceeded', evalue: `no FINAL answer after ${p.maxSteps} steps (max_steps)`, traceback: [] },
      }
    messages.push({ role: 'assistant', content: r.code || '# (no code)' }, { role: 'user', content: stepMessage(r.output, n, p.maxSteps, p.outputChars) })
    return 'continue'
  }

  private async finish(status: DoneStatusT, code: string[], outputs: string[], final: string | undefined, log: Logger): Promise<void> {
    const p = this.p
    const end = Date.now()
    const duration = end - this.startedAt
    try {
      await this.turnLog.finish(status, duration, this.firstStepStarted)
    } catch (err) {
      log.error({ err }, 'could not record the end of a turn')
    }
    const entries: HistoryEntry[] = [
      { role: 'user', content: p.content, mode: p.mode, turn_id: this.id, created_at: this.startedAt, model: p.model },
      {
        role: 'assistant',
        content: code.join('\n'),
        mode: p.mode,
        turn_id: this.id,
        created_at: end,
        status,
        model: p.model,
        ...(outputs.length ? { output: outputs.join('') } : {}),
        ...(final !== undefined ? { final } : {}),
      },
    ]
    await this.deps.history.append(p.sid, entries).catch((err: unknown) => log.warn({ err }, 'could not record history'))
    log.info({ status, durationMs: duration }, 'turn ended')
  }

  private async initialMessages(): Promise<ChatMessage[]> {
    const p = this.p
    const past = await this.deps.history.recent(p.sid, p.historyLength)
    const system = p.mode === 'agent' ? AGENT_SYSTEM_PROMPT : STREAM_SYSTEM_PROMPT
    const task = p.mode === 'agent' ? agentTaskMessage(p.content, p.context) : p.content
    return mergeRoles([{ role: 'system', content: system }, ...historyMessages(past, p.includeOutputs, p.outputChars), { role: 'user', content: task }])
  }

  /** Runs one streamed REPL execution fed by one model reply; its events go straight into the turn's log. */
  private async step(n: number, messages: ChatMessage[], timeoutMs: number): Promise<StepResult> {
    const p = this.p
    const collected = new StepCollector()
    const model = new AbortController()
    const abortModel = () => model.abort()
    this.ac.signal.addEventListener('abort', abortModel, { once: true })
    let pumped: Promise<{ code: string; llmError: LlmError | null }> = Promise.resolve({ code: '', llmError: null })
    let run: StreamedRun | null = null
    try {
      run = await this.deps.executions.runStreamed(p.tenant, p.sid, {
        timeoutMs,
        log: this.turnLog,
        tag: { step: n },
        observe: (e) => collected.take(e),
        onStart: (started) => {
          this.runningStep = started
          // Cancelled while the step waited in the queue: end it empty, without asking the model.
          if (this.cancelReason) {
            started.end()
            return
          }
          pumped = this.pump(started, n, messages.slice(), model.signal, collected)
        },
      })
      // The step's end stops its model reply (an interrupt or timeout ends it while the model still writes).
      void run.done.then(abortModel)
      const status = await untilAborted(run.done, this.ac.signal)
      const { code, llmError } = await pumped
      return { status, code, output: collected.output, final: collected.final, llmError }
    } finally {
      this.ac.signal.removeEventListener('abort', abortModel)
      model.abort()
      if (this.runningStep === run) this.runningStep = null
    }
  }

  /** Streams one model reply into the REPL; ends the REPL stream in every case. */
  private async pump(
    run: StreamedRun,
    n: number,
    messages: ChatMessage[],
    signal: AbortSignal,
    collected: StepCollector,
  ): Promise<{ code: string; llmError: LlmError | null }> {
    const p = this.p
    const filter = new CodeFilter()
    const relay = new CodeRelay(this.turnLog, run, n)
    let llmError: LlmError | null = null
    try {
      if (!this.firstStepStarted) {
        this.firstStepStarted = true
        await this.turnLog.markRunning()
        if (p.mode === 'agent' && p.context !== undefined) await run.setVariable('context', p.context, SET_VAR_TIMEOUT_MS)
      }
      // The reply is charged to the tenant's budget: reserved before (the prompt's estimate and the
      // completion it may ask for, shrunk to what is left), settled after with the use the model
      // reports; without it, a whole reply costs its estimate, one refused before anything was made
      // (HTTP 4xx) what was estimated of it, and one cut short after it left (the step ended under
      // it, a stall, a broken stream) its whole grant: the model may have gone on writing it.
      const need = estimateTokens(messages.reduce((n, m) => n + m.content.length, 0))
      const spend = await this.deps.budget.reserve(p.tenant, { calls: 1, minTokens: need + REPLY_MIN_TOKENS, maxTokens: need + REPLY_MAX_TOKENS })
      const reply = this.deps.llm.streamReply(messages, { model: p.model, signal, idleTimeoutMs: p.modelTimeoutMs, maxTokens: spend.tokens - need })
      let chars = 0
      let charged = spend.tokens
      try {
        let whole = true
        for await (const delta of reply.deltas) {
          chars += delta.length
          if (run.ended) {
            whole = false
            break
          }
          relay.push(filter.push(delta))
        }
        if (whole) charged = need + estimateTokens(chars)
      } catch (err) {
        if (err instanceof LlmError && !err.spendUnknown) charged = need + estimateTokens(chars)
        throw err
      } finally {
        void spend.settle(reply.usage()?.total_tokens ?? charged)
      }
      relay.push(filter.end())
      await relay.drain()
    } catch (err) {
      await relay.settle()
      if (!run.ended) {
        llmError =
          err instanceof LlmError
            ? err
            : new LlmError(`the turn could not continue: ${err instanceof Error ? err.message : String(err)}`, 'protocol', { cause: err })
        this.deps.log.info({ sessionId: p.sid, turnId: this.id, err: llmError.message }, 'model reply failed')
        if (err instanceof LlmBudgetError && !this.account.limitsNoted.has(err.what)) {
          this.account.limitsNoted.add(err.what)
          await this.appendTurn({ type: 'limit', what: err.what, step: n }).catch(() => undefined)
        }
        await this.appendTurn({ type: 'error', ename: 'LLMError', evalue: llmError.message, traceback: [], step: n }).catch(() => undefined)
        // What the broken reply left unfinished must not run, but the complete statements before it
        // must: a line that can never compile follows it, so the REPL runs every complete statement
        // and reports the unfinished rest as a SyntaxError, which the collector leaves out.
        collected.poisoned = true
        run.write(POISON_LINE)
      }
    } finally {
      run.end()
    }
    if (filter.dropped.length) this.deps.log.debug({ turnId: this.id, dropped: filter.dropped }, 'non-code lines dropped from the model reply')
    return { code: relay.code, llmError }
  }
}

/** Joins consecutive messages of one role: some chat templates insist that roles alternate. */
function mergeRoles(messages: ChatMessage[]): ChatMessage[] {
  const out: ChatMessage[] = []
  for (const m of messages) {
    const prev = out[out.length - 1]
    if (prev && prev.role === m.role && m.role !== 'system') prev.content += `\n\n${m.content}`
    else out.push({ ...m })
  }
  return out
}

function cancelError(reason: string): EventPayload {
  return { type: 'error', ename: 'TurnCancelled', evalue: reason, traceback: [] }
}
