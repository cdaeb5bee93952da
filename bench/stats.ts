// Summary figures for benchmark samples (milliseconds).
export function summarize(samples: number[]): { n: number; median: number; p99: number; min: number; max: number } {
  const s = [...samples].sort((a, b) => a - b)
  const at = (q: number) => s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))] ?? NaN
  return { n: s.length, median: at(0.5), p99: at(0.99), min: s[0] ?? NaN, max: s[s.length - 1] ?? NaN }
}

export function line(name: string, samples: number[]): string {
  const r = summarize(samples)
  return `${name.padEnd(44)} n=${String(r.n).padStart(4)}  median=${r.median.toFixed(3).padStart(9)} ms  p99=${r.p99.toFixed(3).padStart(9)} ms  max=${r.max.toFixed(3).padStart(9)} ms`
}
