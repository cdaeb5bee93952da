// The system prompts and the follow-up messages the host writes for the model: what a code
// error, a step's output or a previous turn looked like, each truncated to a bound.
import type { ChatMessage } from './llm-client.js'
import type { HistoryEntry } from './history-store.js'
import { truncate } from './limits.js'

export const STREAM_SYSTEM_PROMPT = `You are a Python REPL agent. Everything you write is executed, statement by statement, as Python 3 code in a persistent interpreter, while you are still writing it. Nothing but the program's output reaches the user.

Rules:
- Answer with Python code only: no markdown, no code fences, no explanations outside the code.
- To speak to the user, use print(). Short lines read well.
- For timing and emphasis, use time.sleep(seconds) between prints (import time first).
- Never state a fact you can compute: do arithmetic, dates, counting and string work in code and print the result.
- The interpreter keeps its state between messages: variables, functions and imports from earlier turns still exist. Reuse them instead of recomputing.
- The sandbox has no network access. Use the standard library.
- If your code raises an exception, you will be shown the traceback. Statements before the failing one already ran and their output was shown; continue from there with corrected code and do not repeat what already worked.`

export const AGENT_SYSTEM_PROMPT = `You are a recursive language model working inside a persistent Python 3 REPL. You answer the user's question by writing Python code; each reply of yours is executed and you are shown its (possibly truncated) output, step after step, until you give a final answer.

The REPL provides:
- \`context\`: the data for this task (may be very large; never print it whole: inspect its type, length, slices, search it with code).
- \`llm_query(prompt: str) -> str\`: asks a language model one question (use it on chunks of \`context\` that need reading or judgement). It is budgeted: use it for real work, not for trivia.
- \`llm_batch(prompts: list[str]) -> list[str]\`: several independent questions at once, answered in parallel.
- \`FINAL(value)\`: ends the task with str(value) as the answer. \`FINAL_VAR(name)\` does the same with the variable called name.
- \`answer\`: a dict; setting answer["value"] = ... and answer["ready"] = True also ends the task.
- \`LLMError\`: raised by llm_query/llm_batch when a call fails or the call budget is exhausted.

Rules:
- Reply with Python code only: no markdown, no prose outside comments.
- Use print() to see intermediate results; keep printed output short.
- Variables persist between steps. Build the answer up in variables.
- Call FINAL(...) or FINAL_VAR(...) as soon as you know the answer.`

export interface StepOutput {
  /** stdout/stderr/results in order, as text. */
  output: string
  error: { ename: string; evalue: string; traceback: string[] } | null
}

function renderOutput(o: StepOutput, maxChars: number): string {
  const parts: string[] = []
  if (o.output) parts.push(o.output)
  if (o.error) parts.push(o.error.traceback.length ? o.error.traceback.join('\n') : `${o.error.ename}: ${o.error.evalue}`)
  const text = parts.join(o.output.endsWith('\n') || !o.output ? '' : '\n')
  return text ? truncate(text, maxChars) : '(no output)'
}

/** Stream mode: the message that sends a traceback back to the model. */
export function correctionMessage(o: StepOutput, attempt: number, maxAttempts: number, maxChars: number): string {
  return `Your code raised an exception (attempt ${attempt} of ${maxAttempts}). Statements before the failing one ran; their effects are in the namespace and their output was shown to the user. Output and traceback:\n\n${renderOutput(o, maxChars)}\n\nReply with Python code only that continues from the current state and fixes the problem. Do not repeat statements that already succeeded.`
}

/** Agent mode: the message after each step. */
export function stepMessage(o: StepOutput, step: number, maxSteps: number, maxChars: number): string {
  const left = maxSteps - step
  return `Output of step ${step}${o.output.length + (o.error ? 1 : 0) > maxChars ? ` (truncated to ${maxChars} characters)` : ''}:\n\n${renderOutput(o, maxChars)}\n\n${left > 0 ? `You have ${left} step${left === 1 ? '' : 's'} left. Continue with Python code; call FINAL(...) or FINAL_VAR(...) when you have the answer.` : ''}`
}

export function agentTaskMessage(content: string, context: unknown): string {
  if (context === undefined) return `${content}\n\n(No \`context\` was given for this task.)`
  const kind =
    typeof context === 'string'
      ? `a str of ${context.length} characters`
      : Array.isArray(context)
        ? `a list of ${context.length} items`
        : `a dict with ${Object.keys(context as object).length} keys`
  return `${content}\n\nThe variable \`context\` in the REPL holds the task's data: ${kind}. It is not shown here; explore it with code.`
}

/** Earlier turns of this session as chat messages: the code that ran and (truncated) what it printed. */
export function historyMessages(entries: HistoryEntry[], includeOutputs: boolean, maxChars: number): ChatMessage[] {
  const out: ChatMessage[] = []
  for (const e of entries) {
    if (e.role === 'user') out.push({ role: 'user', content: e.content })
    else {
      out.push({ role: 'assistant', content: e.content || '# (no code)' })
      const notes: string[] = []
      if (includeOutputs && e.output) notes.push(`Output:\n${truncate(e.output, maxChars)}`)
      if (e.final !== undefined) notes.push(`Final answer: ${truncate(e.final, maxChars)}`)
      if (e.status && e.status !== 'ok') notes.push(`The turn ended with status ${e.status}.`)
      if (notes.length) out.push({ role: 'user', content: `[replcast] ${notes.join('\n')}` })
    }
  }
  return out
}
