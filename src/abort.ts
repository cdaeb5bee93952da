// Waiting on a promise that must not outlive an abort signal (a client that left, a service that closes).

/** Resolves with `p`'s value, or null as soon as `signal` aborts (`p` then settles unobserved). */
export async function untilAborted<T>(p: Promise<T>, signal: AbortSignal): Promise<T | null> {
  if (signal.aborted) {
    p.catch(() => undefined)
    return null
  }
  let onAbort: (() => void) | null = null
  const aborted = new Promise<null>((resolve) => {
    onAbort = () => resolve(null)
    signal.addEventListener('abort', onAbort, { once: true })
  })
  try {
    return await Promise.race([p, aborted])
  } finally {
    if (onAbort) signal.removeEventListener('abort', onAbort)
  }
}
