// Measures how a bystander session fares while another session misbehaves: it runs
// print(1) over and over (as another tenant) and records each round trip's latency.
import Docker from 'dockerode'
import { api, readSse, type SseEvent } from './client.js'

export interface LatencyStats {
  n: number
  failures: string[]
  medianMs: number
  maxMs: number
}

export class NeighbourProbe {
  private samples: number[] = []
  private failures: string[] = []
  private running = false
  private loop: Promise<void> | null = null

  /** `intervalMs` paces the probe (a sampling rate, not a synchronisation). */
  constructor(
    private readonly url: string,
    private readonly sid: string,
    private readonly key: string,
    private readonly intervalMs = 50,
  ) {}

  start(): void {
    this.samples = []
    this.failures = []
    this.running = true
    this.loop = (async () => {
      while (this.running) {
        await this.once()
        if (this.running) await new Promise((r) => setTimeout(r, this.intervalMs))
      }
    })()
  }

  /** Stops after the round trip in flight; guarantees at least one sample. */
  async stop(): Promise<LatencyStats> {
    this.running = false
    await this.loop
    if (this.samples.length === 0 && this.failures.length === 0) await this.once()
    const sorted = [...this.samples].sort((a, b) => a - b)
    return {
      n: sorted.length,
      failures: this.failures,
      medianMs: sorted.length ? sorted[Math.floor(sorted.length / 2)]! : NaN,
      maxMs: sorted.length ? sorted[sorted.length - 1]! : NaN,
    }
  }

  private async once(): Promise<void> {
    const t0 = performance.now()
    try {
      const r = await api(this.url, 'POST', `/v1/sessions/${this.sid}/executions`, { code: 'print(1)' }, { key: this.key })
      const ms = performance.now() - t0
      const out = r.body?.events
        ?.filter((e: any) => e.type === 'stdout')
        .map((e: any) => e.text)
        .join('')
      if (r.status !== 200 || r.body.status !== 'ok' || out !== '1\n') this.failures.push(`${r.status} ${JSON.stringify(r.body).slice(0, 200)}`)
      else this.samples.push(ms)
    } catch (err) {
      this.failures.push(String(err))
    }
  }
}

export const fmtStats = (s: LatencyStats) =>
  `neighbour print(1): n=${s.n} median=${s.medianMs.toFixed(1)}ms max=${s.maxMs.toFixed(1)}ms failures=${s.failures.length}`

/** Container runtimes the local Docker engine has registered (e.g. runc, runsc). */
export async function engineRuntimes(): Promise<Set<string>> {
  const info = (await new Docker().info()) as { Runtimes?: Record<string, unknown> }
  return new Set(Object.keys(info.Runtimes ?? {}))
}

/** Like executeSse, but gives up (throws) after `withinMs`, so a hung stream fails the test instead of stalling it. */
export async function executeWithin(
  base: string,
  sid: string,
  code: string,
  opts: { key: string; timeout_s?: number; withinMs?: number },
): Promise<{ status: number; events: SseEvent[]; done: SseEvent | undefined; ms: number }> {
  const t0 = performance.now()
  const res = await fetch(`${base}/v1/sessions/${sid}/executions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${opts.key}`, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({ code, ...(opts.timeout_s ? { timeout_s: opts.timeout_s } : {}) }),
    signal: AbortSignal.timeout(opts.withinMs ?? 30000),
  })
  if (res.status !== 200)
    return { status: res.status, events: [{ id: '', event: 'http', data: await res.json(), at: 0 }], done: undefined, ms: performance.now() - t0 }
  const events = await readSse(res, (e) => e.event === 'done')
  return { status: res.status, events, done: events.find((e) => e.event === 'done'), ms: performance.now() - t0 }
}
