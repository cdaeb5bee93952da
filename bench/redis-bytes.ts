// Issue 11, Redis bytes kept per print(1) execution: MEMORY USAGE summed over the server's keys (SCAN
// by its prefix) before and after N executions in one session, and after the session is deleted.
import { setTimeout as sleep } from 'node:timers/promises'
import { createSession, deleteSession, printOne, type Target } from './client.js'
import type { Report } from './report.js'
import { redisBytes as bytesUnder, startServer } from './server.js'

const N = Number(process.env.BENCH_REDIS_EXECUTIONS ?? 500)
const WARMUP = 10

export async function redisBytes(report: Report): Promise<void> {
  const G = 'redis-bytes'
  const server = await startServer()
  try {
    const t: Target = server
    const measure = () => bytesUnder(server.redis, server.prefix)
    const empty = await measure()
    const sid = await createSession(t)
    for (let i = 0; i < WARMUP; i++) await printOne(t, sid)
    const before = await measure()
    for (let i = 0; i < N; i++) await printOne(t, sid)
    const after = await measure()
    await deleteSession(t, sid)
    // A delete may finish its clean-up after its reply: give it a moment.
    await sleep(1000)
    const deleted = await measure()
    const perExec = (after.bytes - before.bytes) / N
    console.log(
      `  (${N} executions after ${WARMUP}; keys: ${empty.keys} with no session, ${before.keys} before, ${after.keys} after, ${deleted.keys} after the delete)`,
    )
    report.add(G, 'Redis bytes kept per print(1) execution', perExec, 'bytes', { target: '<= 1024 bytes', met: perExec <= 1024 })
    const left = (deleted.bytes - empty.bytes) / (N + WARMUP)
    report.add(G, 'Redis bytes per execution left after its session is deleted', left, 'bytes', {
      target: '<= 1024 bytes',
      met: left <= 1024,
      note: `${deleted.bytes - empty.bytes} bytes in all`,
    })
  } finally {
    await server.close()
  }
}
