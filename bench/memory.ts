// Issue 11, host memory per idle session: the memory cgroup of a session's container once its REPL
// said ready (the create's reply) and it idled a few seconds, as `docker stats` counts it; baseline: the
// same image with the same flags running an idle `python3 -c 'import time; time.sleep(1e9)'`.
import { setTimeout as sleep } from 'node:timers/promises'
import { createSession, type Target } from './client.js'
import { containerMemory, removeRaw, startRaw, type RawContainer } from './raw-docker.js'
import type { Report } from './report.js'
import { startServer } from './server.js'
import { summarize } from './stats.js'
import { containerName } from '../src/sandbox/container-spec.js'

const N = 5
const IDLE_MS = 5000
const MB = 1024 * 1024

export async function idleMemory(report: Report): Promise<void> {
  const G = 'memory'
  const server = await startServer()
  const raw = `${server.deployment}-raw`
  const idle: RawContainer[] = []
  try {
    const t: Target = server
    const sids: string[] = []
    for (let i = 0; i < N; i++) sids.push(await createSession(t))
    for (let i = 0; i < N; i++) idle.push(await startRaw(raw, 'runc', ['python3', '-c', 'import time; time.sleep(1e9)']))
    await sleep(IDLE_MS)
    const ours = await Promise.all(sids.map((s) => containerMemory(containerName(s))))
    const base = await Promise.all(idle.map((c) => containerMemory(c.container.id)))
    const med = (xs: number[]) => summarize(xs).median / MB
    console.log(
      `  (${N} of each, idle ${IDLE_MS / 1000} s; the cgroup's whole usage with page cache: sessions ${med(ours.map((m) => m.usage)).toFixed(1)} MiB, idle python3 ${med(base.map((m) => m.usage)).toFixed(1)} MiB)`,
    )
    const value = med(ours.map((m) => m.stats))
    report.add(G, 'host memory per idle session (docker stats), median', value, 'MiB', {
      baseline: { name: 'same image, idle python3', value: med(base.map((m) => m.stats)) },
      ratio: 'ours/baseline',
      target: '<= 8 MiB',
      met: value <= 8,
    })
  } finally {
    await Promise.all(idle.map((c) => c.remove()))
    await server.close()
    await removeRaw(raw)
  }
}
