// One execution as the chaos soak's client received it, across every resume, held to the contract:
// every event once and in order, exactly one `done` and last, the output exactly what the code
// printed, and the session's counter one more than last time unless its sandbox was killed.
import type { SseEvent } from './client.js'
import type { Tally } from './tally.js'

/** One session of the load, as its client knows it. */
export interface ChaosSession {
  index: number
  /** What its code prints before the counter: tells one session's output from another's. */
  label: string
  sid: string
  /** Faults that killed its sandbox so far (the fault injector counts one before it strikes). */
  sandboxKills: number
  /** `sandboxKills` when the session was last created or restarted. */
  killsAtRestart: number
  /** The counter's last value seen: 0 after a restart (the next one is 1), undefined before any. */
  last: number | undefined
  /** Code POSTs whose connection broke before an answer (each may have run unseen), not yet matched by a skip in the counter. */
  allowance: number
  /** The session answered 404: its loop stops. */
  lost: boolean
}

/** The code each execution runs: a counter in the namespace, a line, a short sleep, another line. */
export function codeOf(s: ChaosSession, sleepS: number): string {
  return `import time\ntry:\n    chaos_n += 1\nexcept NameError:\n    chaos_n = 1\nprint(${JSON.stringify(s.label)}, chaos_n, flush=True)\ntime.sleep(${sleepS})\nprint("end", flush=True)`
}

export interface Received {
  eid: string
  /** Every event with an id, in the order they arrived, repeats included (a `shutdown` has none). */
  events: SseEvent[]
  /** When it was sent, in the tally's seconds. */
  at: number
}

/** What the client made of an execution that ended: what its stored log must say to any later reader. */
export interface Seen {
  s: ChaosSession
  eid: string
  at: number
  /** Its stdout, each event once. */
  text: string
  status: string
  /** The ids it got, each once. */
  ids: string[]
}

/** An event id ("ms-seq") as one number, for comparing. */
export const idValue = (id: string) => {
  const [ms, seq] = id.split('-')
  return (BigInt(ms ?? 0) << 64n) + BigInt(seq ?? 0)
}

/** Checks one execution; counts it, and any violation, in `tally`; moves the session's counter on. */
export function checkExecution(s: ChaosSession, r: Received, tally: Tally): Seen | null {
  tally.executions++
  const where = `session ${s.label} (${s.sid}) execution ${r.eid}`
  const ids = r.events.map((e) => e.id)
  const got = new Set<string>()
  const once: SseEvent[] = []
  let repeated = 0
  let top = -1n
  for (const e of r.events) {
    if (got.has(e.id)) {
      repeated++
      continue
    }
    got.add(e.id)
    const v = idValue(e.id)
    if (v <= top) tally.violation('order', `${where}: id ${e.id} after a higher one; ids ${ids.join(', ')}`)
    top = v > top ? v : top
    once.push(e)
  }
  const text = once
    .filter((e) => e.event === 'stdout')
    .map((e) => e.data?.text ?? '')
    .join('')
  const raw = r.events
    .filter((e) => e.event === 'stdout')
    .map((e) => e.data?.text ?? '')
    .join('')
  if (repeated) tally.violation('duplicate', `${where}: ${repeated} events received twice: ${JSON.stringify(raw)}; ids ${ids.join(', ')}`)

  const dones = once.filter((e) => e.event === 'done')
  if (dones.length > 1) tally.violation('dones', `${where}: ${dones.length} done events; ids ${ids.join(', ')}`)
  const done = dones[0]
  if (!done) tally.violation('loss', `${where}: no done; received ${JSON.stringify(raw)}; ids ${ids.join(', ')}`)
  else if (once.at(-1)?.event !== 'done') tally.violation('order', `${where}: events after done; ids ${ids.join(', ')}`)
  const status = String(done?.data?.status ?? '')
  const sandboxKilled = s.sandboxKills > s.killsAtRestart
  if (status === 'killed') {
    tally.killed++
    if (!sandboxKilled)
      tally.violation(
        'died',
        `${where}: ended killed though no fault killed its sandbox (${once.find((e) => e.event === 'error')?.data?.evalue ?? 'no error event'}): ${JSON.stringify(raw)}; done ${JSON.stringify(done?.data)}; ids ${ids.join(', ')}`,
      )
  } else if (done && status !== 'ok') tally.violation('done_status', `${where}: done ${JSON.stringify(done.data)}`)
  // A killed sandbox's execution says so in an error event; any other error, stderr or limit is not the code's.
  for (const e of once.filter((e) => (e.event === 'error' && status !== 'killed') || e.event === 'stderr' || e.event === 'limit'))
    tally.violation('output', `${where}: a ${e.event} event: ${JSON.stringify(e.data).slice(0, 300)}`)

  // The output: "<label> <n>\nend\n", whole unless the sandbox was killed under it.
  const first = new RegExp(`^${s.label} (\\d+)\\n`).exec(text)
  const n = first ? Number(first[1]) : undefined
  const expected = n === undefined ? '' : `${s.label} ${n}\nend\n`
  if (done && !repeated && (text !== expected || (status === 'ok' && n === undefined))) {
    const line = first?.[0]
    const prefix = n === undefined ? `${s.label} `.startsWith(text) : expected.startsWith(text)
    const twice = (l: string) => text.split(l).length > 2
    if ((line && twice(line)) || twice('end\n'))
      tally.violation('duplicate', `${where}: a printed line came twice under other ids: ${JSON.stringify(text)}; ids ${ids.join(', ')}`)
    else if (status === 'ok' && prefix)
      tally.violation('loss', `${where}: output ${JSON.stringify(text)} is short of what the code printed; ids ${ids.join(', ')}`)
    else if (status === 'ok' || !prefix) tally.violation('output', `${where}: output ${JSON.stringify(text)} (done ${status}); ids ${ids.join(', ')}`)
  }

  const seen = done ? { s, eid: r.eid, at: r.at, text, status, ids: once.map((e) => e.id) } : null
  // The counter: one more than last time, or 1 after a restart; each cut POST may explain one skip.
  if (n === undefined) {
    // Killed before it printed: whether it counted is unknown, and the namespace is gone anyway.
    if (!done || status !== 'killed') s.allowance++
    return seen
  }
  if (s.last !== undefined) {
    const skipped = n - s.last - 1
    if (n === 1 && s.last > 0) tally.violation('namespace_lost', `${where}: the counter started again after ${s.last} though its sandbox was not killed`)
    else if (skipped < 0 || skipped > s.allowance)
      tally.violation('counter', `${where}: counter ${n} after ${s.last} (${s.allowance} cut POSTs may explain a skip)`)
    else s.allowance -= skipped
  }
  s.last = n
  return seen
}
