// What the chaos soak counted: executions, resumes, faults by kind, every answer by status and code,
// and every violation of the contract, with enough detail to find it in the instances' logs.

/** What a client must never see (issue 31); `duplicate` and `loss` are the two counted apart. */
export type ViolationKind =
  | 'duplicate' // an event id twice across resumes, or a printed line replayed under new ids
  | 'loss' // no `done` in time, or less output than the code printed (its sandbox not killed)
  | 'dones' // more than one `done`
  | 'order' // an event id lower than one already seen, not a repeat; or events after `done`
  | 'output' // output that is not what the code printed
  | 'done_status' // a `done` other than ok (or killed, when its sandbox was killed)
  | 'died' // a session dead, or an execution killed, though no fault killed its sandbox
  | 'namespace_lost' // the counter started again though the sandbox was not killed
  | 'counter' // the counter skipped or repeated a value no cut request explains
  | 'session_lost' // a session answered 404
  | 'not_problem' // an error answer that is not application/problem+json, or a 503 without Retry-After
  | 'internal' // a 500
  | 'unexpected' // an answer the client has no business getting (a 4xx it did not provoke)
  | 'final_answer' // at the end, a session did not answer through an instance with its counter
  | 'left_behind' // containers or keys left after every session was deleted
  | 'unclean_exit' // an instance that did not exit 0 after SIGTERM

export interface Violation {
  kind: ViolationKind
  /** Seconds since the load started. */
  at: number
  detail: string
}

export class Tally {
  executions = 0
  /** Executions whose `done` said killed (their sandbox was killed). */
  killed = 0
  /** Streams opened again with Last-Event-ID (or from the start, when no event had come yet). */
  resumes = 0
  /** POSTs of code whose connection broke before any answer: the code may or may not have run. */
  unanswered = 0
  /** Sessions restarted after their sandbox was killed. */
  restarts = 0
  readonly faults = new Map<string, number>()
  /** Faults not injected, because no target was fit for them at that moment. */
  readonly skipped = new Map<string, number>()
  /** Every answer by "status code", e.g. "503 session_moving". */
  readonly answers = new Map<string, number>()
  readonly violations: Violation[] = []
  /** When each fault struck, in seconds since the load started. */
  readonly faultTimes: number[] = []
  /** Executions whose stored log was read again at the end (those that began near a fault). */
  rechecked = 0
  private readonly t0 = performance.now()

  constructor(private readonly log: (line: string) => void = () => undefined) {}

  /** Seconds since the tally was made (the load's start). */
  now(): number {
    return (performance.now() - this.t0) / 1000
  }

  violation(kind: ViolationKind, detail: string): void {
    const v = { kind, at: this.now(), detail }
    this.violations.push(v)
    this.log(`  ! ${v.at.toFixed(1)} s ${kind}: ${detail}`)
  }

  fault(kind: string, target: string): void {
    this.faults.set(kind, (this.faults.get(kind) ?? 0) + 1)
    this.faultTimes.push(this.now())
    this.log(`  ${this.now().toFixed(1)} s fault ${kind} ${target}`)
  }

  skip(kind: string, why: string): void {
    this.skipped.set(kind, (this.skipped.get(kind) ?? 0) + 1)
    this.log(`  ${this.now().toFixed(1)} s fault ${kind} skipped: ${why}`)
  }

  answer(key: string): void {
    this.answers.set(key, (this.answers.get(key) ?? 0) + 1)
  }

  count(kind: ViolationKind): number {
    return this.violations.filter((v) => v.kind === kind).length
  }

  /** Violations by kind, duplicates and losses included. */
  byKind(): Record<string, number> {
    const out: Record<string, number> = {}
    for (const v of this.violations) out[v.kind] = (out[v.kind] ?? 0) + 1
    return out
  }

  /** The report's lines. */
  summary(): string[] {
    const list = (m: Map<string, number>) =>
      [...m]
        .sort()
        .map(([k, n]) => `${k} ${n}`)
        .join(', ') || 'none'
    const others = Object.entries(this.byKind()).filter(([k]) => k !== 'duplicate' && k !== 'loss')
    const lines = [
      `executions: ${this.executions} (${this.killed} ended killed with their sandbox; ${this.rechecked} near a fault read again at the end); resumes: ${this.resumes}; ` +
        `code POSTs cut before an answer: ${this.unanswered}; sessions restarted after a sandbox kill: ${this.restarts}`,
      `faults: ${list(this.faults)}${this.skipped.size ? ` (skipped: ${list(this.skipped)})` : ''}`,
      `duplicates: ${this.count('duplicate')}; losses: ${this.count('loss')}; other violations: ${others.reduce((n, [, c]) => n + c, 0)}` +
        (others.length ? ` (${others.map(([k, n]) => `${k} ${n}`).join(', ')})` : ''),
      `error answers: ${list(new Map([...this.answers].filter(([k]) => !k.startsWith('2'))))}`,
    ]
    for (const v of this.violations.slice(0, 30)) lines.push(`  ${v.at.toFixed(1)} s ${v.kind}: ${v.detail}`)
    if (this.violations.length > 30) lines.push(`  ... ${this.violations.length - 30} more`)
    return lines
  }
}
