// Reads one sample of a Prometheus metric from an app's /metrics (tests poll these: they are what
// an operator sees, and they change exactly when the state they describe does).
export async function metricValue(base: string, name: string, labels: Record<string, string> = {}): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text()
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`)
  for (const line of text.split('\n')) {
    if (!line.startsWith(name) || line.startsWith('#')) continue
    const m = /^([^{\s]+)(?:\{([^}]*)\})?\s+(\S+)$/.exec(line)
    if (!m || m[1] !== name) continue
    const have = (m[2] ?? '').split(',').filter(Boolean)
    if (want.every((w) => have.includes(w))) return Number(m[3])
  }
  return 0
}
