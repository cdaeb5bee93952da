// The ReplClient test harness: a client over an in-memory transport with a logger that records
// warnings, and small helpers for settling promises and faking timers.
import { mock } from 'node:test'
import type { Logger } from 'pino'
import { ReplClient } from '../../src/repl/repl-client.js'
import type { ReplFrame } from '../../src/repl/protocol.js'
import { memoryTransportPair, type FakeRepl, type MemoryTransport } from './memory-transport.js'

export interface Warning {
  obj: Record<string, unknown>
  msg: string
}

export function recordingLogger(): { log: Logger; warnings: Warning[] } {
  const warnings: Warning[] = []
  const log = {
    warn: (obj: Record<string, unknown>, msg: string) => {
      warnings.push({ obj, msg })
    },
  } as unknown as Logger
  return { log, warnings }
}

export interface Harness {
  client: ReplClient
  repl: FakeRepl
  transport: MemoryTransport
  warnings: Warning[]
}

export function connect(opts: { readyTimeoutMs?: number; expectReady?: boolean } = {}): Harness {
  const { transport, repl } = memoryTransportPair()
  const { log, warnings } = recordingLogger()
  const client = new ReplClient(transport, log, { readyTimeoutMs: opts.readyTimeoutMs ?? 60_000, expectReady: opts.expectReady ?? false })
  return { client, repl, transport, warnings }
}

/** The `text` of each frame, for compact assertions on what a sink received. */
export const texts = (frames: ReplFrame[]): unknown[] => frames.map((f) => f.text)

/** Lets already-settled promises run their callbacks (no timers involved). */
export const flush = (): Promise<void> => new Promise((resolve) => setImmediate(resolve))

/** Tracks whether a promise settled, without awaiting it. */
export function watch<T>(p: Promise<T>): { settled: () => boolean } {
  let done = false
  p.then(
    () => {
      done = true
    },
    () => {
      done = true
    },
  )
  return { settled: () => done }
}

/** Fake setTimeout for one test: ReplClient's timers fire only when the test ticks the clock. */
export function fakeTimers(t: { teardown: (fn: () => void) => void }): void {
  mock.timers.enable({ apis: ['setTimeout'] })
  t.teardown(() => mock.timers.reset())
}
