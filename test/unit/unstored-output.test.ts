// Output in flight to Redis is bounded across sessions (src/sessions/unstored-output.ts): a session
// alone may have the whole bound in flight, sessions flooding together a share each; a session with
// little output is never held back beside them; a held session comes again once Redis has stored
// all but a quarter of its share.
import t from 'tap'
import { MIN_SHARE_BYTES, UNSTORED_TOTAL_BYTES, UnstoredOutput } from '../../src/sessions/runner/unstored-output.js'

const KIB = 1024

function setup() {
  const held = new Set<string>()
  const holds: string[] = []
  const out = new UnstoredOutput<string>((s, on) => {
    holds.push(`${s} ${on ? 'held' : 'let go'}`)
    if (on) held.add(s)
    else held.delete(s)
  })
  return { out, held, holds }
}

t.test('a session alone may have the whole bound in flight; past it, it is held until a quarter of it is left', async (t) => {
  const { out, held } = setup()
  out.sent('a', UNSTORED_TOTAL_BYTES)
  t.same([...held], [], `${UNSTORED_TOTAL_BYTES / KIB} KiB in flight: not held`)
  out.sent('a', 1)
  t.same([...held], ['a'], 'one byte more: held')
  out.stored('a', UNSTORED_TOTAL_BYTES / 2)
  t.same([...held], ['a'], 'half of it stored: still held')
  out.stored('a', UNSTORED_TOTAL_BYTES / 4)
  t.same([...held], ['a'], 'a quarter and a byte left: still held')
  out.stored('a', 1)
  t.same([...held], [], 'a quarter left: let go')
})

t.test('sessions flooding together each get a share of the bound, and one with little output is never held', async (t) => {
  const { out, held } = setup()
  const floods = ['a', 'b', 'c', 'd']
  const share = Math.max(MIN_SHARE_BYTES, UNSTORED_TOTAL_BYTES / (floods.length + 1))
  out.sent('neighbour', 200)
  for (const s of floods) out.sent(s, 16 * KIB)
  for (let sent = 16 * KIB; sent <= share; sent += 16 * KIB) for (const s of floods) out.sent(s, 16 * KIB)
  t.same([...held].sort(), floods, `each flooding session is held past its share (${(share / KIB).toFixed(0)} KiB of ${UNSTORED_TOTAL_BYTES / KIB})`)
  out.sent('neighbour', 200)
  t.notOk(held.has('neighbour'), 'the session with little output is not')
  out.stored('neighbour', 400)
  out.stored('a', share)
  t.notOk(held.has('a'), 'a session whose output Redis stored comes again')
  t.ok(held.has('b'), 'the others wait for theirs')
})

t.test('the bound is shared only while sessions have output in flight: once stored, a session is forgotten', async (t) => {
  const { out, held, holds } = setup()
  out.sent('a', 100 * KIB)
  out.sent('b', 100 * KIB)
  out.stored('b', 100 * KIB)
  out.sent('a', UNSTORED_TOTAL_BYTES - 100 * KIB)
  t.same([...held], [], 'b has nothing in flight any more: a may use the whole bound again')
  t.same(holds, [])
})
