// The chaos soak, short (issue 31): a minute of steady stateful load on three instances and one
// Redis, with a fault every 7 s in a fixed seeded order (every kind once) and leases of 3 s (so that
// a paused instance or Redis outlives them), and not one violation:
// every event exactly once across resumes, one done each, the output and the namespace intact,
// every session answering through every instance, nothing left after delete. The long one:
// npm run soak -- chaos.
import { rmSync } from 'node:fs'
import t from 'tap'
import { FAULT_KINDS } from './faults.js'
import { chaosOptions, runChaos } from './chaos.js'

t.test('a minute of faults under stateful load: every event exactly once, nothing lost or left', async (t) => {
  const opts = chaosOptions({}, { seed: 31, seconds: 56, sessions: 4, instances: 3, faultEveryS: 7, leaseTtlMs: 3000, log: (line) => t.comment(line) })
  // The instances' logs are kept for a look when the test fails.
  t.teardown(() => {
    if (t.passing()) rmSync(opts.logDir, { recursive: true, force: true })
  })
  const { tally, lines } = await runChaos(opts)
  for (const line of lines) t.comment(line)
  t.ok(tally.executions > 50, `steady load (${tally.executions} executions)`)
  t.same(
    FAULT_KINDS.filter((k) => !tally.faults.get(k)),
    [],
    'every kind of fault was injected',
  )
  t.same(tally.byKind(), {}, 'no violations')
})
