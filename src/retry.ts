// Retrying what must not be lost to a passing failure (Redis restarting, a Docker call timing out),
// with exponential backoff and a bound, and a time limit for work that must not hang its caller.
import { untilAborted } from './abort.js'

export interface RetryOptions {
  /** Tries in all (default: unbounded, until `windowMs` is spent). */
  attempts?: number
  /** Gives up once this long has passed since the first try (default: unbounded, until `attempts`). */
  windowMs?: number
  firstDelayMs?: number
  maxDelayMs?: number
  /** False: the error is final (e.g. Redis answered with an error), thrown at once. */
  retryable?: (err: unknown) => boolean
  /** Told of each failure that will be retried. */
  onRetry?: (err: unknown, attempt: number) => void
  /** Stops the retries: once it aborts, the wait ends and the last error is thrown. */
  signal?: AbortSignal
}

/** Runs `fn` until it succeeds or the bound is reached; throws the last error then. */
export async function retry<T>(fn: () => Promise<T>, opts: RetryOptions): Promise<T> {
  const start = Date.now()
  const first = opts.firstDelayMs ?? 100
  const max = opts.maxDelayMs ?? 2000
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn()
    } catch (err) {
      const delay = Math.min(max, first * 2 ** (attempt - 1))
      const outOfTries = opts.attempts !== undefined && attempt >= opts.attempts
      const outOfTime = opts.windowMs !== undefined && Date.now() + delay - start > opts.windowMs
      if (outOfTries || outOfTime || (opts.retryable && !opts.retryable(err))) throw err
      opts.onRetry?.(err, attempt)
      await wait(delay, opts.signal)
      if (opts.signal?.aborted) throw err
    }
  }
}

/** `ms` milliseconds, or less when `signal` aborts first. */
async function wait(ms: number, signal: AbortSignal | undefined): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  await untilAborted(new Promise((resolve) => (timer = setTimeout(resolve, ms))), signal ?? new AbortController().signal)
  clearTimeout(timer)
}

/** Redis did not answer (connection refused, closed, retries spent); a reply error is final. */
export function isRedisUnavailable(err: unknown): boolean {
  return (err as { name?: string } | null)?.name !== 'ReplyError'
}

export class TimeoutError extends Error {
  override name = 'TimeoutError'
}

/** `p`, or a TimeoutError after `ms` (the work itself is not stopped: give it its own bound too). */
export async function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new TimeoutError(`${what} did not finish within ${ms} ms`)), ms)
      }),
    ])
  } finally {
    clearTimeout(timer)
  }
}
