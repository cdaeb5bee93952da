// What a later reader sees: at the end, the stored log of every execution that began near a fault is
// read again (GET .../executions/{eid}) and must say what its client saw. A holder that lost its lease
// while frozen, or a second holder, may append to a log after its `done`, where no follower looks.
import { ChaosClient } from './client.js'
import { idValue, type Seen } from './execution-check.js'
import type { Tally } from './tally.js'

/** An execution is read again when it began this long before a fault ... */
const BEFORE_S = 1
/** ... or this long after one (past an instance's 5 s SIGSTOP and a take-over). */
const AFTER_S = 10
/** Reads at once. */
const PARALLEL = 6

interface StoredEvent {
  id: string
  type: string
  text?: string
}

export async function recheckStored(seen: Seen[], next: () => string, client: ChaosClient, tally: Tally): Promise<void> {
  const near = (at: number) => tally.faultTimes.some((t) => at >= t - BEFORE_S && at <= t + AFTER_S)
  const queue = seen.filter((x) => !x.s.lost && near(x.at))
  const worker = async () => {
    for (let x = queue.pop(); x; x = queue.pop()) await recheck(x, next, client, tally)
  }
  await Promise.all(Array.from({ length: PARALLEL }, worker))
}

async function recheck(x: Seen, next: () => string, client: ChaosClient, tally: Tally): Promise<void> {
  const where = `session ${x.s.label} (${x.s.sid}) execution ${x.eid}, its stored log`
  for (let attempt = 0; attempt < 20; attempt++) {
    const o = await client.send(`${next()}/v1/sessions/${x.s.sid}/executions/${x.eid}`, {})
    if (o.kind !== 'answer') continue
    // A session restarted since: its older executions may be gone with its sandbox's history.
    if (o.code === 'execution_not_found') return
    if (o.res.status !== 200) {
      await ChaosClient.backOff(o.res)
      continue
    }
    tally.rechecked++
    const events = ((await o.res.json()) as { events?: StoredEvent[] }).events ?? []
    const ids = events.map((e) => e.id)
    if (new Set(ids).size !== ids.length) tally.violation('duplicate', `${where} holds an event id twice: ${ids.join(', ')}`)
    if (ids.some((id, i) => i > 0 && idValue(id) <= idValue(ids[i - 1]!))) tally.violation('order', `${where}: ids out of order: ${ids.join(', ')}`)
    const dones = events.filter((e) => e.type === 'done').length
    if (dones !== 1 || events.at(-1)?.type !== 'done')
      tally.violation('dones', `${where}: ${dones} done events, the last event ${events.at(-1)?.type}; ids ${ids.join(', ')}`)
    const text = events
      .filter((e) => e.type === 'stdout')
      .map((e) => e.text ?? '')
      .join('')
    if (text !== x.text) {
      const twice = text.split('\n').filter((l, i, all) => l && all.indexOf(l) !== i).length > 0
      tally.violation(
        twice ? 'duplicate' : 'output',
        `${where}: ${JSON.stringify(text)}, its client got ${JSON.stringify(x.text)} (done ${x.status}); ids ${ids.join(', ')}, its client's ${x.ids.join(', ')}`,
      )
    }
    return
  }
  tally.violation('final_answer', `${where} could not be read`)
}
