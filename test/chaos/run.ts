// The chaos soak from the command line: npm run soak -- chaos (scripts/soak.sh), or
// node --import=@tapjs/typescript/import test/chaos/run.ts. Knobs, as environment variables:
// CHAOS_SEED (random, printed), CHAOS_SECONDS (240), CHAOS_SESSIONS (6), CHAOS_INSTANCES (2),
// CHAOS_FAULT_S (15), CHAOS_FAULTS (a comma list of test/chaos/faults.ts's kinds; all by default),
// CHAOS_SLEEP_S (0.1), CHAOS_LEASE_TTL_MS (15000, the default), CHAOS_BUILD (dist: src/ compiled first, as npm start
// runs it; src: src/server.ts through the TypeScript loader), CHAOS_LOG_DIR (.replcast/chaos-SEED-TIME).
// Prints its counts and every violation; exits 1 on any violation.
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { chaosOptions, runChaos } from './chaos.js'

const opts = chaosOptions(process.env)
const t0 = performance.now()
const { tally, lines } = await runChaos(opts)
for (const line of lines) console.log(line)
console.log(`${((performance.now() - t0) / 1000).toFixed(0)} s in all; seed ${opts.seed}; logs and report in ${opts.logDir}`)
writeFileSync(
  join(opts.logDir, 'report.json'),
  JSON.stringify(
    {
      seed: opts.seed,
      seconds: opts.seconds,
      sessions: opts.sessions,
      instances: opts.instances,
      faultEveryS: opts.faultEveryS,
      lines,
      violations: tally.violations,
    },
    null,
    2,
  ),
)
process.exit(tally.violations.length ? 1 : 0)
