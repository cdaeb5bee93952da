// RateLimiter: a tenant's requests counted in memory and added to Redis every 100 ms. On one
// instance the limit is exact, also while a flush is on its way to Redis.
import t from 'tap'
import { RateLimiter } from '../../src/http/rate-limit.js'

const NOW = 30 * 60_000 + 30_000

/** A store whose INCRBYs answer only when the test says so; `asked(n)` resolves once it has been asked n times. */
function heldStore() {
  let total = 0
  const pending: Array<{ n: number; answer: () => void }> = []
  const waiters: Array<{ count: number; resolve: () => void }> = []
  return {
    pending,
    addRequests(_tenant: string, _minute: number, n: number): Promise<number> {
      return new Promise<number>((resolve) => {
        pending.push({ n, answer: () => resolve((total += n)) })
        for (const w of waiters.filter((w) => w.count <= pending.length)) {
          waiters.splice(waiters.indexOf(w), 1)
          w.resolve()
        }
      })
    },
    asked(count: number): Promise<void> {
      return pending.length >= count ? Promise.resolve() : new Promise((resolve) => waiters.push({ count, resolve }))
    },
  }
}

t.test('requests that arrive while a flush is on its way to Redis still count against the limit', async (t) => {
  const store = heldStore()
  const limiter = new RateLimiter(
    store,
    (err) => t.fail(String(err)),
    () => NOW,
  )
  // The limiter's flush timer does not keep a process alive (unref): this test waits for it.
  const alive = setInterval(() => {}, 60_000)
  t.teardown(() => {
    clearInterval(alive)
    for (const p of store.pending) p.answer()
    return limiter.close()
  })
  const take = () => limiter.take('alpha', 20, NOW)

  const first = take()
  await store.asked(1)
  store.pending[0]!.answer()
  t.ok((await first).ok, "the minute's first request, counted by Redis")
  const next = await Promise.all(Array.from({ length: 18 }, take))
  t.ok(
    next.every((r) => r.ok),
    '18 more, counted here',
  )

  await store.asked(2) // the flush of those 18, whose reply is held
  t.equal(store.pending[1]!.n, 18, 'the flush carries the 18')
  const during = await Promise.all(Array.from({ length: 5 }, take))
  t.equal(during.filter((r) => r.ok).length, 1, 'only the 20th is admitted while the flush is in flight')

  store.pending[1]!.answer()
  await store.asked(3) // the flush of the 20th
  store.pending[2]!.answer()
  t.notOk((await take()).ok, 'and nothing more once Redis has answered')
})
