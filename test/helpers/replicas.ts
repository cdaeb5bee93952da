// Several real server processes (src/server.ts) on one Redis key prefix and one Docker deployment
// label, as replicas behind a plain balancer: a test sends requests round-robin, SIGKILLs or
// SIGTERMs one. Teardown stops them all and removes every container and key they left.
import type { Redis } from 'ioredis'
import type { Test } from 'tap'
import { processDeployment } from './deployment.js'
import type { ServerProcess } from './server-process.js'

export interface Replicas {
  prefix: string
  deployment: string
  redis: Redis
  servers: ServerProcess[]
  /** Instance ids, by index. */
  ids: string[]
  /** The next server's URL, round-robin (skipping the ones that were stopped). */
  next(): string
  /** The index of the server whose instance holds the session's lease (-1: none). */
  holderOf(sid: string): Promise<number>
  /** Sends `signal` and waits for the process to exit; it leaves the round-robin. */
  stop(i: number, signal: 'SIGKILL' | 'SIGTERM'): Promise<void>
  /** Starts a stopped server again with its settings (the same instance id and port); it rejoins the round-robin. */
  restart(i: number): Promise<void>
}

export async function startReplicas(t: Test, n: number, extra: Record<string, string> = {}): Promise<Replicas> {
  const d = processDeployment(t)
  const { prefix, deployment, redis } = d
  const ids = Array.from({ length: n }, (_, i) => `replica${i}-${d.tag}`)
  const servers: ServerProcess[] = []
  const stopped = new Set<number>()
  for (let i = 0; i < n; i++) servers.push(await d.start(`replica${i}`, extra))
  let turn = 0
  return {
    prefix,
    deployment,
    redis,
    servers,
    ids,
    next() {
      for (;;) {
        const i = turn++ % n
        if (!stopped.has(i)) return servers[i]!.url
      }
    },
    async holderOf(sid) {
      return ids.indexOf((await redis.get(`${prefix}{${sid}}:lease`)) ?? '')
    },
    async stop(i, signal) {
      stopped.add(i)
      const s = servers[i]!
      if (s.child.exitCode !== null || s.child.signalCode !== null) return
      const exited = new Promise((r) => s.child.once('exit', r))
      s.child.kill(signal)
      await exited
    },
    async restart(i) {
      servers[i] = await d.start(`replica${i}`)
      stopped.delete(i)
    },
  }
}
