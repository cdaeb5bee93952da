// HostCapacity (src/sessions/supply/host-capacity.ts) over an in-memory engine: a create does not list the
// engine again when it was listed a moment ago, yet a refusal always comes from a new listing, and
// a place granted from the last listing is counted again, anew, once the sandbox exists.
import t from 'tap'
import { pino } from 'pino'
import { HostCapacity } from '../../src/sessions/supply/host-capacity.js'

const MIB = 1024 * 1024

/** An engine with 1000 MiB of memory, half of which sandboxes may be promised. */
function engine() {
  const sandboxes = new Map<string, number>()
  let listings = 0
  const capacity = new HostCapacity(
    {
      totalBytes: async () => 1000 * MIB,
      sandboxLimits: async () => {
        listings++
        return new Map(sandboxes)
      },
    },
    0.5,
    pino({ level: 'silent' }),
  )
  /** A create as the session service makes it: a place, the sandbox, the count after it, the place given up. */
  const create = async (id: string, mb: number) => {
    const place = await capacity.reserve(id, mb)
    sandboxes.set(id, mb * MIB)
    await place.confirm()
    place.release()
  }
  return { capacity, sandboxes, create, listings: () => listings }
}

t.test('creates in a row list the engine once before, and each once after its sandbox exists', async (t) => {
  const e = engine()
  for (const id of ['s1', 's2', 's3']) await e.create(id, 100)
  t.equal(e.listings(), 4, 'one listing before the first create, then one confirm per create')
})

t.test('a refusal comes from a new listing, not from the last one', async (t) => {
  const e = engine()
  await e.create('big', 400)
  // Gone from the engine since it was last listed: the next create fits after all.
  e.sandboxes.delete('big')
  const before = e.listings()
  const next = await e.capacity.reserve('next', 200)
  t.equal(e.listings(), before + 1, 'the engine was listed again rather than refusing from its last listing')
  // Full both by the last listing and by the engine now: refused, after a new listing.
  e.sandboxes.set('other', 250 * MIB)
  await t.rejects(e.capacity.reserve('late', 400), { code: 'capacity' })
  t.equal(e.listings(), before + 2)
  next.release()
})

t.test('a place granted from the last listing is counted anew once the sandbox exists', async (t) => {
  const e = engine()
  await e.create('s1', 100)
  // Another instance fills the engine meanwhile: the last listing still says there is room.
  e.sandboxes.set('elsewhere', 350 * MIB)
  const place = await e.capacity.reserve('s2', 100)
  e.sandboxes.set('s2', 100 * MIB)
  await t.rejects(place.confirm(), { code: 'capacity' }, 'the count after the create refuses it')
  place.release()
})

t.test("an instance's own places in flight count against the last listing", async (t) => {
  const e = engine()
  const a = await e.capacity.reserve('a', 300)
  await t.rejects(e.capacity.reserve('b', 300), { code: 'capacity' }, 'two 300 MiB places do not fit in 500')
  a.release()
})
