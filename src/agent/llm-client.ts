// The one wrapper around the `openai` SDK: a streamed reply as an async iterable of text
// deltas, and a plain completion for sub-calls. It turns the SDK's edges (silent early end,
// a stalled stream, malformed chunks, HTTP errors) into one error type with a clear message,
// which also says whether the call may have cost tokens and whether it is worth retrying.
import { OpenAI } from 'openai'
import type { Logger } from 'pino'
import { LlmError } from './errors.js'

export type ChatMessage = { role: 'system' | 'user' | 'assistant'; content: string }

export interface Usage {
  prompt_tokens: number
  completion_tokens: number
  total_tokens: number
}

export interface CallOptions {
  model: string
  signal: AbortSignal
  /** Fails when nothing arrives for this long (before the first byte, or between chunks), ms. */
  idleTimeoutMs: number
  maxTokens: number
}

export interface LlmClient {
  /** Streams the reply's text deltas; `usage()` is known after the iteration ends. Throws LlmError. */
  streamReply(messages: ChatMessage[], opts: CallOptions): { deltas: AsyncIterable<string>; usage: () => Usage | null }
  /** One complete reply (sub-calls), one request: never retried here. Throws LlmError. */
  complete(messages: ChatMessage[], opts: CallOptions): Promise<{ text: string; usage: Usage | null }>
}

/** Rough token count for servers that report no usage: about four characters a token. */
export const estimateTokens = (chars: number): number => Math.ceil(chars / 4)

/** The wait before retrying a failed call when the endpoint names none (the SDK's first backoff), ms. */
const RETRY_DELAY_MS = 500
/** The longest wait asked for by Retry-After that is honoured (a longer one gets the default, as in the SDK), ms. */
const MAX_RETRY_WAIT_MS = 60_000
/** Error codes of a connection that was never made: the request cannot have reached the model. */
const NEVER_CONNECTED = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH'])

export class OpenAiLlmClient implements LlmClient {
  private readonly sdk: OpenAI

  /** `apiKey` may be empty (local servers): the SDK needs some value, so a placeholder is sent. */
  constructor(baseURL: string, apiKey: string, log: Logger) {
    this.sdk = new OpenAI({
      baseURL,
      apiKey: apiKey || 'not-needed',
      // Never retried behind our back: every attempt that leaves costs tokens, and each must be
      // charged to the tenant's budget. A live turn fails fast; sub-calls retry themselves.
      maxRetries: 0,
      timeout: 10 * 60 * 1000,
      logger: {
        error: (m, ...a) => log.warn({ detail: a }, `openai: ${m}`),
        warn: (m) => log.warn(`openai: ${m}`),
        info: () => undefined,
        debug: () => undefined,
      },
    })
  }

  streamReply(messages: ChatMessage[], opts: CallOptions): { deltas: AsyncIterable<string>; usage: () => Usage | null } {
    let usage: Usage | null = null
    const sdk = this.sdk
    const deltas = async function* (): AsyncGenerator<string> {
      if (opts.signal.aborted) throw cancelledBeforeSent()
      const idle = new IdleWatch(opts.idleTimeoutMs, opts.signal)
      let finished = false
      try {
        const stream = await idle.guard(
          sdk.chat.completions.create(
            { model: opts.model, messages, stream: true, max_tokens: opts.maxTokens, stream_options: { include_usage: true } },
            { signal: idle.signal },
          ),
        )
        const it = stream[Symbol.asyncIterator]()
        for (;;) {
          const next = await idle.guard(it.next())
          if (next.done) break
          const chunk = next.value
          if (chunk.usage)
            usage = { prompt_tokens: chunk.usage.prompt_tokens, completion_tokens: chunk.usage.completion_tokens, total_tokens: chunk.usage.total_tokens }
          const choice = chunk.choices?.[0]
          if (choice?.finish_reason) finished = true
          const text = choice?.delta?.content
          if (typeof text === 'string' && text) yield text
        }
      } catch (err) {
        throw toLlmError(err, idle, opts)
      } finally {
        idle.stop()
      }
      // The SDK ends quietly when the connection closes before [DONE]; a real reply always says why it ended.
      if (!finished) throw new LlmError("the model's stream ended before the reply was complete (no finish_reason)", 'protocol')
    }
    return { deltas: deltas(), usage: () => usage }
  }

  async complete(messages: ChatMessage[], opts: CallOptions): Promise<{ text: string; usage: Usage | null }> {
    if (opts.signal.aborted) throw cancelledBeforeSent()
    const idle = new IdleWatch(opts.idleTimeoutMs, opts.signal)
    try {
      const res = await idle.guard(this.sdk.chat.completions.create({ model: opts.model, messages, max_tokens: opts.maxTokens }, { signal: idle.signal }))
      const text = res.choices?.[0]?.message?.content
      if (typeof text !== 'string') throw new LlmError('the model answered without text', 'protocol')
      const u = res.usage
      return { text, usage: u ? { prompt_tokens: u.prompt_tokens, completion_tokens: u.completion_tokens, total_tokens: u.total_tokens } : null }
    } catch (err) {
      throw toLlmError(err, idle, opts)
    } finally {
      idle.stop()
    }
  }
}

/** An abort signal that fires when the caller aborts or when no progress is reported for `ms`. */
class IdleWatch {
  private readonly ac = new AbortController()
  private timer: NodeJS.Timeout | null = null
  timedOut = false
  private readonly onOuter = () => this.ac.abort(this.outer.reason)

  constructor(
    private readonly ms: number,
    private readonly outer: AbortSignal,
  ) {
    if (outer.aborted) this.ac.abort(outer.reason)
    else outer.addEventListener('abort', this.onOuter, { once: true })
    this.arm()
  }

  get signal(): AbortSignal {
    return this.ac.signal
  }

  private arm(): void {
    if (this.timer) clearTimeout(this.timer)
    this.timer = setTimeout(() => {
      this.timedOut = true
      this.ac.abort(new Error('idle timeout'))
    }, this.ms)
    this.timer.unref()
  }

  /** Awaits `p`, re-arming the idle timer when it settles; rejects as soon as the signal aborts. */
  async guard<T>(p: Promise<T>): Promise<T> {
    const signal = this.ac.signal
    if (signal.aborted) {
      p.catch(() => undefined)
      throw signal.reason
    }
    let onAbort: (() => void) | null = null
    try {
      return await Promise.race([
        p,
        new Promise<never>((_, reject) => {
          onAbort = () => reject(asError(signal.reason))
          signal.addEventListener('abort', onAbort, { once: true })
        }),
      ])
    } finally {
      if (onAbort) signal.removeEventListener('abort', onAbort)
      p.catch(() => undefined)
      if (!signal.aborted) this.arm()
    }
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer)
    this.outer.removeEventListener('abort', this.onOuter)
    if (!this.ac.signal.aborted) this.ac.abort(new Error('done'))
  }
}

const cancelledBeforeSent = () => new LlmError('the model call was cancelled', 'aborted', { spendUnknown: false })

/** Errors of a request that left count as spent (`spendUnknown`, the default) unless the endpoint refused it or it never connected. */
function toLlmError(err: unknown, idle: IdleWatch, opts: CallOptions): LlmError {
  if (err instanceof LlmError) return err
  if (idle.timedOut) return new LlmError(`the model sent nothing for ${Math.round(opts.idleTimeoutMs / 100) / 10} s`, 'timeout', { cause: err })
  if (opts.signal.aborted) return new LlmError('the model call was cancelled', 'aborted', { cause: err })
  if (err instanceof OpenAI.APIError && typeof err.status === 'number') {
    return new LlmError(`the model endpoint answered HTTP ${err.status}: ${firstLine(err.message)}`, 'http', {
      cause: err,
      spendUnknown: err.status < 400 || err.status >= 500,
      retryAfterMs: retryAfterMs(err.status, err.headers as Headers | undefined),
    })
  }
  if (err instanceof OpenAI.APIConnectionError)
    return new LlmError(`could not reach the model endpoint (${firstLine(err.message)})`, 'connection', {
      cause: err,
      spendUnknown: !neverConnected(err),
      retryAfterMs: RETRY_DELAY_MS,
    })
  if (err instanceof OpenAI.APIError) return new LlmError(`the model reported an error: ${firstLine(err.message)}`, 'protocol', { cause: err })
  if (err instanceof SyntaxError) return new LlmError("the model's stream sent a malformed chunk", 'protocol', { cause: err })
  return new LlmError(`the model call failed: ${firstLine(err instanceof Error ? err.message : String(err))}`, 'connection', { cause: err })
}

/** The SDK's rule for an HTTP error worth retrying (the endpoint's x-should-retry first), and the wait it asks for. */
function retryAfterMs(status: number, headers: Headers | undefined): number | null {
  const say = headers?.get('x-should-retry')
  if (say === 'false' || (say !== 'true' && status !== 408 && status !== 409 && status !== 429 && status < 500)) return null
  const ms = Number(headers?.get('retry-after-ms') ?? NaN)
  const asked = Number.isFinite(ms) ? ms : Number(headers?.get('retry-after') ?? NaN) * 1000
  return Number.isFinite(asked) && asked >= 0 && asked <= MAX_RETRY_WAIT_MS ? asked : RETRY_DELAY_MS
}

/** Whether a connection error says the connection was never made (the fetch error's causes carry the system's code). */
function neverConnected(err: unknown): boolean {
  for (let e = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code
    if (typeof code === 'string') return NEVER_CONNECTED.has(code)
  }
  return false
}

/** An abort reason as an Error (reasons set here always are; a caller's may not be). */
const asError = (reason: unknown): Error => (reason instanceof Error ? reason : new Error(String(reason)))

const firstLine = (s: string) => s.split('\n')[0]!.slice(0, 300)
