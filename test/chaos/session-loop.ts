// One session of the chaos soak's load: runs its stateful execution again and again through the
// instances in turn, following each one's SSE stream and resuming a cut stream with Last-Event-ID on
// the next instance, as a careful user's client would; a dead session (its sandbox killed) is restarted.
import { ChaosClient, type SseEvent } from './client.js'
import { checkExecution, codeOf, type ChaosSession, type Seen } from './execution-check.js'
import type { Tally } from './tally.js'

/** How long one execution may take to reach its `done`, across every fault and resume. */
const EXECUTION_DEADLINE_MS = 60_000

export interface LoopDeps {
  client: ChaosClient
  tally: Tally
  /** The next instance's URL (round-robin). */
  next: () => string
  /** True once the load should end: no new execution starts then. */
  over: () => boolean
  /** The sleep between the code's two lines, in seconds. */
  sleepS: number
  /** Every execution that ended, as the client saw it (for test/chaos/stored-check.ts). */
  seen: Seen[]
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Runs executions in `s` until the load is over (or the session is lost). */
export async function runSession(s: ChaosSession, d: LoopDeps): Promise<void> {
  while (!d.over() && !s.lost) {
    const at = d.tally.now()
    const started = await start(s, d)
    if (!started) return
    const events: SseEvent[] = []
    await follow(s, d, started.eid, started.res, events)
    const seen = checkExecution(s, { eid: started.eid, events, at }, d.tally)
    if (seen) d.seen.push(seen)
  }
}

/** POSTs the code until an instance accepts it; null once the load is over first (or the session is lost). */
async function start(s: ChaosSession, d: LoopDeps): Promise<{ eid: string; res: Response } | null> {
  const code = codeOf(s, d.sleepS)
  while (!d.over()) {
    const o = await d.client.send(`${d.next()}/v1/sessions/${s.sid}/executions`, { method: 'POST', json: { code, timeout_s: 30 }, sse: true })
    if (o.kind === 'refused') {
      await pause(50)
      continue
    }
    if (o.kind === 'broken') {
      // It may have reached the holder and run: the counter may skip one.
      d.tally.unanswered++
      s.allowance++
      continue
    }
    const { res, code: problem } = o
    if (res.status === 200) {
      const eid = res.headers.get('location')?.split('/').pop()
      if (eid) return { eid, res }
      d.tally.violation('unexpected', `POST executions of ${s.sid} → 200 without a Location`)
      await res.body?.cancel()
    } else if (problem === 'session_dead') await restart(s, d)
    else if (!(await otherwise(s, d, res, problem, 'POST executions'))) return null
  }
  return null
}

/**
 * Reads the POST's stream, then resumes on the next instance until the execution's `done` (or its
 * deadline). `events` gets every event with an id, in the order they arrived.
 */
async function follow(s: ChaosSession, d: LoopDeps, eid: string, first: Response, events: SseEvent[]): Promise<void> {
  let lastId = ''
  let done = false
  const onEvent = (e: SseEvent) => {
    if (!e.id) return // `shutdown`: the stream ends, resumed below
    lastId = e.id
    done ||= e.event === 'done'
    events.push(e)
  }
  const deadline = performance.now() + EXECUTION_DEADLINE_MS
  await d.client.read(first, onEvent, deadline)
  while (!done && performance.now() < deadline) {
    const o = await d.client.send(`${d.next()}/v1/sessions/${s.sid}/executions/${eid}/events`, { sse: true, lastEventId: lastId })
    if (o.kind !== 'answer') {
      await pause(50)
      continue
    }
    if (o.res.status === 200) {
      d.tally.resumes++
      await d.client.read(o.res, onEvent, deadline)
    } else if (o.res.status === 204)
      return // nothing after lastId, and it has ended: without a done, a loss
    else if (o.code === 'execution_not_found') return
    else if (!(await otherwise(s, d, o.res, o.code, 'GET events'))) return
  }
}

/** Restarts a dead session (its sandbox was killed): a fresh namespace, so the counter starts at 1. */
async function restart(s: ChaosSession, d: LoopDeps): Promise<void> {
  if (s.sandboxKills === s.killsAtRestart) d.tally.violation('died', `session ${s.label} (${s.sid}) is dead though no fault killed its sandbox`)
  const kills = s.sandboxKills
  const deadline = performance.now() + EXECUTION_DEADLINE_MS
  while (performance.now() < deadline) {
    const o = await d.client.send(`${d.next()}/v1/sessions/${s.sid}/restart`, { method: 'POST' })
    if (o.kind !== 'answer') {
      await pause(50)
      continue
    }
    if (o.res.status === 200) {
      await o.res.body?.cancel()
      s.killsAtRestart = kills
      s.last = 0
      s.allowance = 0
      d.tally.restarts++
      return
    }
    if (!(await otherwise(s, d, o.res, o.code, 'POST restart'))) return
  }
  d.tally.violation('loss', `session ${s.label} (${s.sid}): no restart succeeded within ${EXECUTION_DEADLINE_MS / 1000} s`)
}

/** Any other answer: waits and says to try again, or, for a session gone, says to stop. */
async function otherwise(s: ChaosSession, d: LoopDeps, res: Response, code: string, what: string): Promise<boolean> {
  if (code === 'session_not_found') {
    d.tally.violation('session_lost', `${what} of session ${s.label} (${s.sid}) → 404`)
    s.lost = true
    return false
  }
  // 503 (Redis away, the session moving), 429, a queue behind code a cut POST left running, a 500
  // (already counted): wait, and again.
  if (!(res.status === 503 || res.status === 429 || res.status === 500 || code === 'queue_full'))
    d.tally.violation('unexpected', `${what} of ${s.sid} → ${res.status} ${code}`)
  await ChaosClient.backOff(res)
  return true
}
