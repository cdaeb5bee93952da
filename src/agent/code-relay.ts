// Moves a model's code from its reply into a streamed run: each piece is logged as a `code` event
// before it is sent to the REPL, so a code event always precedes the output it causes. Pieces that
// arrive while a log write is in flight are sent together.
import type { DrivenLog, StreamedRun } from '../sessions/index.js'

export class CodeRelay {
  /** All the code passed on so far. */
  code = ''
  private buffered = ''
  private flushing: Promise<void> | null = null
  private failure: Error | null = null

  constructor(
    private readonly log: DrivenLog,
    private readonly run: StreamedRun,
    private readonly step: number,
  ) {}

  /** Queues a piece of code; throws the log's error once a write failed (the reply must stop there). */
  push(text: string): void {
    if (this.failure) throw this.failure
    if (!text) return
    this.code += text
    this.buffered += text
    this.flushing ??= this.flush()
  }

  /** Waits until everything pushed is logged and sent; throws the log's error if a write failed. */
  async drain(): Promise<void> {
    await this.flushing
    if (this.failure) throw this.failure
  }

  /** Waits for writes in flight, whatever their outcome. */
  async settle(): Promise<void> {
    await this.flushing
  }

  private async flush(): Promise<void> {
    try {
      while (this.buffered && !this.run.ended) {
        const text = this.buffered
        this.buffered = ''
        await this.log.append({ type: 'code', delta: text, step: this.step })
        this.run.write(text)
      }
    } catch (e) {
      this.failure = e instanceof Error ? e : new Error(String(e))
    } finally {
      this.flushing = null // in the same tick as the last check of `buffered`: no piece is left behind
    }
  }
}
