// The chaos soak's end, once every fault has been recovered from: each session answers through each
// instance with its namespace as the load left it; then every session is deleted, and nothing of
// them may be left (containers, keys, counted bytes, slots); every instance stops cleanly on SIGTERM.
import { containersOf } from '../helpers/app.js'
import { waitFor } from '../helpers/wait.js'
import { ChaosClient } from './client.js'
import type { Cluster } from './cluster.js'
import type { ChaosSession } from './execution-check.js'
import type { Tally } from './tally.js'

/** How long the end may wait for the service to settle: takeovers, Redis reconnecting, removals. */
const SETTLE_MS = 30_000

export async function finalChecks(c: Cluster, sessions: ChaosSession[], client: ChaosClient, tally: Tally): Promise<void> {
  for (const i of c.instances) {
    const ready = await waitFor(async () => (await fetch(`${i.url}/readyz`).catch(() => null))?.status === 200, SETTLE_MS, 200)
    if (!ready) tally.violation('final_answer', `instance ${i.id} is not ready ${SETTLE_MS / 1000} s after the last fault`)
  }
  for (const s of sessions.filter((x) => !x.lost)) for (const i of c.instances) await answers(s, i.url, client, tally)
  for (const s of sessions.filter((x) => !x.lost)) await remove(s, c, client, tally)
  if (!(await waitFor(async () => (await containersOf(c.deployment)).length === 0, SETTLE_MS, 200)))
    tally.violation('left_behind', `containers after every session was deleted: ${(await containersOf(c.deployment)).map((x) => x.Names[0]).join(', ')}`)
  const admin = c.admin()
  try {
    let left: string[] = []
    await waitFor(async () => (left = await leftKeys(admin, c.prefix)).length === 0, SETTLE_MS, 200)
    if (left.length) tally.violation('left_behind', `keys after every session was deleted: ${left.slice(0, 20).join(', ')}`)
  } finally {
    admin.disconnect()
  }
  for (const i of c.instances) {
    const code = await i.stop('SIGTERM')
    if (code !== '0') tally.violation('unclean_exit', `instance ${i.id} exited ${code} after the final SIGTERM`)
  }
}

/** The session answers code through `url` (passed to its holder) with the counter the load left. */
async function answers(s: ChaosSession, url: string, client: ChaosClient, tally: Tally): Promise<void> {
  const code = `print(${JSON.stringify(s.label)}, globals().get("chaos_n"))`
  const end = performance.now() + SETTLE_MS
  let last = 'no answer'
  while (performance.now() < end) {
    const o = await client.send(`${url}/v1/sessions/${s.sid}/executions`, { method: 'POST', json: { code } })
    if (o.kind !== 'answer') {
      last = o.kind
      await new Promise((r) => setTimeout(r, 200))
      continue
    }
    if (o.res.status !== 200) {
      last = `${o.res.status} ${o.code}`
      await ChaosClient.backOff(o.res)
      continue
    }
    const body = (await o.res.json()) as { status?: string; events?: Array<{ type: string; text?: string }> }
    const text = (body.events ?? [])
      .filter((e) => e.type === 'stdout')
      .map((e) => e.text)
      .join('')
    const n = Number(new RegExp(`^${s.label} (\\d+)\\n$`).exec(text)?.[1] ?? 0)
    const want = s.last ?? 0
    // A cut POST may have run after the last execution seen: it counted one more.
    if (body.status === 'ok' && (text === `${s.label} None\n` ? want === 0 : n >= want && n <= want + s.allowance)) {
      s.allowance -= n - want
      s.last = n
      return
    }
    tally.violation('final_answer', `session ${s.label} (${s.sid}) through ${url}: ${body.status} ${JSON.stringify(text)}, counter ${want} expected`)
    return
  }
  tally.violation('final_answer', `session ${s.label} (${s.sid}) did not answer through ${url} within ${SETTLE_MS / 1000} s (last: ${last})`)
}

async function remove(s: ChaosSession, c: Cluster, client: ChaosClient, tally: Tally): Promise<void> {
  const end = performance.now() + SETTLE_MS
  let last = 'no answer'
  while (performance.now() < end) {
    const o = await client.send(`${c.next()}/v1/sessions/${s.sid}`, { method: 'DELETE' })
    if (o.kind === 'answer' && o.res.status === 204) return
    if (o.kind === 'answer') {
      last = `${o.res.status} ${o.code}`
      if (o.res.status === 404) break
      await ChaosClient.backOff(o.res)
    } else {
      last = o.kind
      await new Promise((r) => setTimeout(r, 200))
    }
  }
  tally.violation('final_answer', `DELETE session ${s.label} (${s.sid}): ${last}`)
}

/**
 * What deleted sessions left in Redis: any key of a session (its hash tag), the tenant's sessions,
 * running slots, log bytes and ended logs, idle deadlines, an instance's session set, or event bytes
 * still counted. (Redis removes an emptied set, so a key that exists holds something.)
 */
async function leftKeys(redis: ReturnType<Cluster['admin']>, prefix: string): Promise<string[]> {
  const left: string[] = []
  for (const key of await redis.keys(`${prefix}*`)) {
    const name = key.slice(prefix.length)
    if (/^\{(?!tenant:)/.test(name) || /^tenant:[^:]+:(sessions|running|log-bytes|ended-logs|truncated-logs)$/.test(name) || name === 'deadlines')
      left.push(name)
    else if (/^instance:[^:]+:sessions$/.test(name)) left.push(name)
    else if (/^tenant:[^:]+:event-bytes$/.test(name)) {
      const v = await redis.get(key)
      if (Number(v) !== 0) left.push(`${name}=${v}`)
    }
  }
  return left
}
