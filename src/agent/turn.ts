// One LLM turn. A turn is an execution id of its own whose event log the client follows; its
// work runs as one or more streamed REPL executions ("steps") in the session's queue. Each
// step's model tokens are pumped into the REPL as they arrive (code events first, so they
// precede the output they cause), and the step's log is mirrored into the turn's log in
// order. Between steps the host decides: self-correct (stream mode), continue (agent mode)
// or stop. The turn's log ends with exactly one `done`, whatever happens.
import type { Logger } from 'pino'
import type { DoneStatusT } from '../schemas.js'
import type { RedisStore } from '../store/redis-store.js'
import type { LiveSession, SessionService } from '../sessions/session-service.js'
import { newPendingExecution, type EventPayload } from '../sessions/execution.js'
import { newId } from '../sessions/ids.js'
import { CodeFilter } from './code-filter.js'
import { LlmError, type ChatMessage, type LlmClient } from './llm-client.js'
import type { HistoryEntry, HistoryStore } from './history-store.js'
import { AGENT_SYSTEM_PROMPT, STREAM_SYSTEM_PROMPT, agentTaskMessage, correctionMessage, historyMessages, stepMessage, type StepOutput } from './prompts.js'
import { REPLY_MAX_TOKENS, type SubCallBudget } from './limits.js'
import { SubCallAccount, type SubCalls } from './sub-calls.js'

/** Output kept per step for the model and the history (the model sees a truncated part of it). */
const STEP_OUTPUT_KEEP_CHARS = 200_000
const SET_VAR_TIMEOUT_MS = 60_000
/** Ends a broken reply: `$` is not Python anywhere outside a string, so what precedes it cannot run as a statement. */
const POISON_LINE = '\n$\n'

export interface TurnParams {
  tenant: string
  sid: string
  turnId: string
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
  sessions: SessionService
  store: RedisStore
  history: HistoryStore
  llm: LlmClient
  subCalls: SubCalls
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
  private runningStep: { eid: string; ended: boolean } | null = null
  /** When it began running (a turn waiting behind another is not on the clock yet). */
  private startedAt = Date.now()
  private firstStepStarted = false
  /** llm_query/llm_batch budget of the whole turn, shared by all its steps. */
  private readonly account: SubCallAccount

  constructor(private readonly p: TurnParams, private readonly deps: TurnDeps, private readonly announcedQueued: boolean) {
    this.account = new SubCallAccount(p.budget, p.model, this.ac.signal)
  }

  get sessionId(): string { return this.p.sid }
  /** Whether its first step has started (a turn still waiting behind another is not interrupted). */
  get started(): boolean { return this.firstStepStarted }

  /** Ends the turn early (client gone, service closing): interrupts the running step. */
  cancel(reason: string): void {
    if (this.cancelReason) return
    this.cancelReason = reason
    if (this.runningStep && !this.runningStep.ended) void this.deps.sessions.interrupt(this.p.tenant, this.p.sid).catch(() => undefined)
  }

  /** Aborts everything without waiting for the REPL (the service is closing). */
  abort(): void { this.cancel('the service is shutting down'); this.ac.abort() }

  private appendTurn(e: EventPayload): Promise<string> { return this.deps.sessions.append(this.p.sid, this.p.turnId, e) }

  /** Runs the turn to its end. Never throws; writes exactly one `done`. */
  async run(): Promise<void> {
    this.startedAt = Date.now()
    const p = this.p
    const log = this.deps.log.child({ sessionId: p.sid, turnId: p.turnId })
    let status: DoneStatusT = 'error'
    const code: string[] = []
    const outputs: string[] = []
    let final: string | undefined
    try {
      const messages = await this.initialMessages()
      for (let n = 1; ; n++) {
        if (this.cancelReason) { await this.appendTurn(cancelError(this.cancelReason)); status = 'interrupted'; break }
        const remaining = this.startedAt + p.timeoutMs - Date.now()
        if (remaining <= 0) { await this.appendTurn({ type: 'error', ename: 'TimeoutError', evalue: `the turn used its ${p.timeoutMs / 1000} s`, traceback: [] }); status = 'timeout'; break }
        const r = await this.step(n, messages, remaining)
        if (r.code) code.push(r.code)
        if (r.output.output) outputs.push(r.output.output)
        if (r.final !== undefined) final = r.final
        if (r.llmError) { status = 'error'; break }
        if (r.status === null) { status = 'killed'; break } // mirror aborted: the service is closing
        if (r.status !== 'ok' && r.status !== 'error') {
          if (this.cancelReason && r.status === 'interrupted') await this.appendTurn(cancelError(this.cancelReason))
          status = r.status
          break
        }
        if (p.mode === 'stream') {
          if (r.status === 'ok') { status = 'ok'; break }
          if (n >= p.maxAttempts) { status = 'error'; break }
          messages.push({ role: 'assistant', content: r.code || '# (no code)' }, { role: 'user', content: correctionMessage(r.output, n, p.maxAttempts, p.outputChars) })
        } else {
          if (final !== undefined) { status = 'ok'; break }
          if (n >= p.maxSteps) {
            await this.appendTurn({ type: 'error', ename: 'MaxStepsExceeded', evalue: `no FINAL answer after ${p.maxSteps} steps (max_steps)`, traceback: [] })
            status = 'error'
            break
          }
          messages.push({ role: 'assistant', content: r.code || '# (no code)' }, { role: 'user', content: stepMessage(r.output, n, p.maxSteps, p.outputChars) })
        }
      }
    } catch (err) {
      log.warn({ err }, 'turn failed')
      const message = err instanceof Error && 'code' in err && typeof (err as { code: unknown }).code === 'string' ? err.message : 'the turn could not continue (internal error)'
      await this.appendTurn({ type: 'error', ename: 'ReplcastError', evalue: message, traceback: [] }).catch(() => undefined)
      status = 'error'
    } finally {
      this.ac.abort()
    }
    await this.finish(status, code, outputs, final, log)
  }

  private async finish(status: DoneStatusT, code: string[], outputs: string[], final: string | undefined, log: Logger): Promise<void> {
    const p = this.p
    const end = Date.now()
    const duration = end - this.startedAt
    try {
      await this.appendTurn({ type: 'done', status, duration_ms: duration })
      await this.deps.store.updateExecution(p.sid, p.turnId, { status, ended_at: end, duration_ms: duration, ...(this.firstStepStarted ? {} : { started_at: null }) })
      await this.deps.store.expireExecution(p.sid, p.turnId)
    } catch (err) {
      log.error({ err }, 'could not record the end of a turn')
    }
    const entries: HistoryEntry[] = [
      { role: 'user', content: p.content, mode: p.mode, turn_id: p.turnId, created_at: this.startedAt, model: p.model },
      {
        role: 'assistant', content: code.join('\n'), mode: p.mode, turn_id: p.turnId, created_at: end, status, model: p.model,
        ...(outputs.length ? { output: outputs.join('') } : {}), ...(final !== undefined ? { final } : {}),
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

  /** Runs one streamed REPL execution fed by one model reply; returns once its log is mirrored. */
  private async step(n: number, messages: ChatMessage[], timeoutMs: number): Promise<StepResult> {
    const p = this.p
    const { sessions, subCalls } = this.deps
    // Looked up per step: a restart between steps replaces the session's live attachment.
    const live = await sessions.liveSession(p.tenant, p.sid)
    const eid = newId('exe')
    const ex = newPendingExecution(eid, '', timeoutMs, 'stream')
    const state = { eid, ended: false }
    const model = new AbortController()
    const abortModel = () => model.abort()
    this.ac.signal.addEventListener('abort', abortModel, { once: true })
    let poisoned = false
    let pumped: Promise<{ code: string; llmError: LlmError | null }> = Promise.resolve({ code: '', llmError: null })
    const done = new Promise<DoneStatusT>((resolve) => {
      ex.onDone = (s) => { state.ended = true; model.abort(); resolve(s) }
    })
    ex.onStart = () => {
      this.runningStep = state
      // Cancelled while the step waited in the queue: end it empty, without asking the model.
      if (this.cancelReason) { live.client.streamEnd(eid); return }
      pumped = this.pump(live, n, eid, messages.slice(), model.signal, state, () => { poisoned = true })
    }
    subCalls.register(eid, this.account)
    try {
      await sessions.enqueue(live, ex)
      const mirrored = await this.mirror(n, eid, () => poisoned)
      // The REPL's done can only come after the pump ended the stream (or an interrupt ended it first).
      const status = mirrored.status ?? (this.ac.signal.aborted ? null : await done)
      const { code, llmError } = await pumped
      return { status, code, output: mirrored.output, final: mirrored.final, llmError }
    } finally {
      this.ac.signal.removeEventListener('abort', abortModel)
      model.abort()
      subCalls.unregister(eid)
      if (this.runningStep === state) this.runningStep = null
    }
  }

  /** Streams one model reply into the REPL; ends the REPL stream in every case. */
  private async pump(live: LiveSession, n: number, eid: string, messages: ChatMessage[], signal: AbortSignal, state: { ended: boolean }, markPoisoned: () => void): Promise<{ code: string; llmError: LlmError | null }> {
    const p = this.p
    const { sessions, llm } = this.deps
    const client = live.client
    const filter = new CodeFilter()
    let code = ''
    let llmError: LlmError | null = null
    // Code deltas are logged before they are sent to the REPL, so a code event always precedes
    // the output it causes. Deltas that arrive while a log write is in flight are sent together.
    let buffered = ''
    let flushing: Promise<void> | null = null
    let flushError: unknown = null
    const flush = async () => {
      try {
        while (buffered && !state.ended) {
          const text = buffered
          buffered = ''
          await sessions.append(p.sid, eid, { type: 'code', delta: text, step: n })
          if (!state.ended) client.streamChunk(eid, text)
        }
      } catch (e) {
        flushError = e
      } finally {
        flushing = null // in the same tick as the last check of `buffered`: no delta is left behind
      }
    }
    const emit = (text: string) => {
      if (flushError) throw flushError // the log cannot take code: stop the reply here
      if (!text) return
      code += text
      buffered += text
      flushing ??= flush()
    }
    try {
      if (!this.firstStepStarted) {
        this.firstStepStarted = true
        if (this.announcedQueued) await this.appendTurn({ type: 'status', state: 'running', execution_id: p.turnId })
        await this.deps.store.updateExecution(p.sid, p.turnId, { status: 'running', started_at: Date.now() })
        if (p.mode === 'agent' && p.context !== undefined) await client.request('set_var', { name: 'context', value: p.context }, SET_VAR_TIMEOUT_MS)
      }
      const reply = llm.streamReply(messages, { model: p.model, signal, idleTimeoutMs: p.modelTimeoutMs, maxTokens: REPLY_MAX_TOKENS })
      for await (const delta of reply.deltas) {
        if (state.ended) break
        emit(filter.push(delta))
      }
      emit(filter.end())
      await flushing
      if (flushError) throw flushError
    } catch (err) {
      await flushing
      if (!state.ended) {
        llmError = err instanceof LlmError ? err : new LlmError(`the turn could not continue: ${err instanceof Error ? err.message : String(err)}`, 'protocol', { cause: err })
        this.deps.log.info({ sessionId: p.sid, turnId: p.turnId, err: llmError.message }, 'model reply failed')
        await sessions.append(p.sid, eid, { type: 'error', ename: 'LLMError', evalue: llmError.message, traceback: [], step: n }).catch(() => undefined)
        // What the broken reply left unfinished must not run, but the complete statements before it
        // must: a line that can never compile follows it, so the REPL runs every complete statement
        // and reports the unfinished rest as a SyntaxError, which the mirror leaves out.
        markPoisoned()
        if (!state.ended) client.streamChunk(eid, POISON_LINE)
      }
    } finally {
      client.streamEnd(eid)
    }
    if (filter.dropped.length) this.deps.log.debug({ turnId: p.turnId, dropped: filter.dropped }, 'non-code lines dropped from the model reply')
    return { code, llmError }
  }

  /** Copies a step's events (minus its status and done) into the turn's log, in order. */
  private async mirror(n: number, eid: string, poisoned: () => boolean): Promise<{ status: DoneStatusT | null; output: StepOutput; final: string | undefined }> {
    const output: StepOutput = { output: '', error: null }
    let status: DoneStatusT | null = null
    let final: string | undefined
    const keep = (text: string) => {
      if (output.output.length < STEP_OUTPUT_KEEP_CHARS) output.output += text.slice(0, STEP_OUTPUT_KEEP_CHARS - output.output.length)
    }
    await this.deps.sessions.follow(this.p.sid, eid, '', async (e) => {
      const { id: _id, seq: _seq, ...payload } = e
      switch (e.type) {
        case 'status': return
        case 'done': status = e.status as DoneStatusT; return
        case 'stdout': case 'stderr': keep(String(e.text ?? '')); break
        case 'result': keep(`${String((e.data as Record<string, unknown> | undefined)?.['text/plain'] ?? '')}\n`); break
        case 'final': final = String(e.value ?? ''); break
        case 'error':
          if (poisoned() && e.ename === 'SyntaxError') return
          if (e.ename !== 'LLMError') output.error = { ename: String(e.ename ?? 'Error'), evalue: String(e.evalue ?? ''), traceback: Array.isArray(e.traceback) ? e.traceback.map(String) : [] }
          break
      }
      await this.appendTurn({ ...payload, step: n })
    }, this.ac.signal)
    return { status, output, final }
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
