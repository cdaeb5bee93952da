// What one step of an LLM turn produced, gathered from its events as they are logged: the output
// the model is shown next (bounded), its error, and an agent's FINAL value.
import type { EventPayload } from '../sessions/index.js'
import type { StepOutput } from './prompts.js'

const str = (v: unknown): string => (typeof v === 'string' ? v : '')

/** Output kept per step for the model and the history (the model sees a truncated part of it). */
const STEP_OUTPUT_KEEP_CHARS = 200_000

export class StepCollector {
  readonly output: StepOutput = { output: '', error: null }
  final: string | undefined
  /** Set when a broken model reply was cut off with a line that cannot compile (its SyntaxError is not the user's). */
  poisoned = false

  /** Takes one event of the step; false when it must stay out of the turn's log. */
  take(e: EventPayload): boolean {
    switch (e.type) {
      case 'stdout':
      case 'stderr':
        this.keep(str(e.text))
        break
      case 'result':
        this.keep(`${str((e.data as Record<string, unknown> | undefined)?.['text/plain'])}\n`)
        break
      case 'final':
        this.final = str(e.value)
        break
      case 'error':
        if (this.poisoned && e.ename === 'SyntaxError') return false
        if (e.ename !== 'LLMError')
          this.output.error = { ename: str(e.ename) || 'Error', evalue: str(e.evalue), traceback: Array.isArray(e.traceback) ? e.traceback.map(str) : [] }
        break
    }
    return true
  }

  private keep(text: string): void {
    const o = this.output
    if (o.output.length < STEP_OUTPUT_KEEP_CHARS) o.output += text.slice(0, STEP_OUTPUT_KEEP_CHARS - o.output.length)
  }
}
