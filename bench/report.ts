// The figures of issue 11's table as npm run bench prints them and keeps them: each with its same-run
// baseline, their ratio and the target, printed as measured and written to bench/results/.
import { execFileSync } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { cpus, loadavg, totalmem } from 'node:os'
import { fileURLToPath } from 'node:url'

export interface Figure {
  group: string
  name: string
  value: number
  unit: string
  baseline?: { name: string; value: number }
  /** How the ratio reads ("jupyter / ours", "ours / raw") and its value. */
  ratio?: { of: string; value: number }
  /** The target, in words, and whether this run met it. */
  target?: string
  met?: boolean
  note?: string
}

export interface FigureOptions {
  baseline?: { name: string; value: number }
  /** "baseline/ours" or "ours/baseline": the ratio is computed from the two values. */
  ratio?: 'baseline/ours' | 'ours/baseline'
  /** Names the ratio's sides when they are not "ours" and the baseline (e.g. "jupyter / ours"). */
  ratioName?: string
  target?: string
  met?: boolean
  note?: string
}

const RESULTS = fileURLToPath(new URL('./results/', import.meta.url))

const fmt = (v: number) =>
  !Number.isFinite(v) || Number.isInteger(v) ? String(v) : Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 10 ? v.toFixed(1) : v.toFixed(2)

export class Report {
  readonly figures: Figure[] = []
  readonly notes: string[] = []
  private readonly started = new Date()
  private readonly file = `${this.started.toISOString().replace(/[:.]/g, '-')}.json`
  /** The machine's load when the run began: on shared cores, figures of two runs compare only at similar loads. */
  readonly loadAtStart = loadavg()

  /** Records a figure and prints it at once (a long run shows its progress). */
  add(group: string, name: string, value: number, unit: string, o: FigureOptions = {}): void {
    const f: Figure = { group, name, value, unit }
    if (o.baseline) {
      f.baseline = o.baseline
      if (o.ratio) {
        const r = o.ratio === 'baseline/ours' ? o.baseline.value / value : value / o.baseline.value
        f.ratio = { of: o.ratioName ?? (o.ratio === 'baseline/ours' ? 'baseline / ours' : 'ours / baseline'), value: r }
      }
    }
    if (o.target !== undefined) f.target = o.target
    if (o.met !== undefined) f.met = o.met
    if (o.note !== undefined) f.note = o.note
    this.figures.push(f)
    console.log(Report.line(f))
  }

  /** A remark that is not a figure (a skipped part, a refusal seen), printed and kept. */
  note(group: string, text: string): void {
    this.notes.push(`[${group}] ${text}`)
    console.log(`  [${group}] note: ${text}`)
  }

  static line(f: Figure): string {
    let s = `  ${f.name.padEnd(60)} ${fmt(f.value).padStart(9)} ${f.unit.padEnd(7)}`
    if (f.baseline) s += ` | ${f.baseline.name}: ${fmt(f.baseline.value)} ${f.unit}`
    if (f.ratio) s += ` | ${f.ratio.of} = ${fmt(f.ratio.value)}x`
    if (f.target) s += ` | target ${f.target}: ${f.met === undefined ? 'n/a here' : f.met ? 'met' : 'NOT met'}`
    if (f.note) s += ` (${f.note})`
    return s
  }

  /** Writes bench/results/<start time>.json and bench/results/latest.json (after each group: a crash keeps what ran). */
  write(finished = false): string {
    mkdirSync(RESULTS, { recursive: true })
    // What was measured: the commit, and whether the server's or the REPL's sources differed from it.
    let commit = process.env.BENCH_COMMIT ?? ''
    try {
      const git = (...args: string[]) =>
        execFileSync('git', args, { stdio: ['ignore', 'pipe', 'ignore'] })
          .toString()
          .trim()
      commit ||= git('rev-parse', 'HEAD') + (git('status', '--porcelain', 'src', 'sandbox-image') ? ' with uncommitted changes to src/ or sandbox-image/' : '')
    } catch {
      /* not a checkout */
    }
    const doc = {
      started: this.started.toISOString(),
      finished: finished ? new Date().toISOString() : null,
      commit,
      host: { cpus: cpus().length, memory_bytes: totalmem(), node: process.version, loadavg_at_start: this.loadAtStart, loadavg_at_end: loadavg() },
      env: Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith('BENCH_'))),
      figures: this.figures,
      notes: this.notes,
    }
    const text = JSON.stringify(doc, null, 2) + '\n'
    writeFileSync(RESULTS + this.file, text)
    writeFileSync(RESULTS + 'latest.json', text)
    return `bench/results/${this.file}`
  }

  /** The figures that have a target, one line each: what a reader checks first. */
  summary(): string[] {
    const verdict = (f: Figure) => (f.met === undefined ? 'n/a    ' : f.met ? 'met    ' : 'NOT met')
    return this.figures.filter((f) => f.target).map((f) => `  ${verdict(f)}  [${f.group}] ${f.name}: ${fmt(f.value)} ${f.unit} (target ${f.target})`)
  }
}
