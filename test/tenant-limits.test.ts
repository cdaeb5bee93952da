// Per-tenant quota and ceiling overrides (src/tenants.ts): parsing, precedence, errors that name the limit.
import t from 'tap'
import { AppError } from '../src/errors.js'
import { checkCeilings, parseTenantLimits } from '../src/tenants.js'

const CONFIG = {
  TENANT_MAX_SESSIONS: 20,
  TENANT_MAX_CONCURRENT_EXECUTIONS: 10,
  TENANT_RATE_PER_MIN: 1200,
  MAX_MEMORY_MB: 2048,
  MAX_CPUS: 2,
  MAX_PIDS: 512,
  MAX_WORKSPACE_MB: 256,
  MAX_EXEC_TIMEOUT_S: 3600,
  MAX_OUTPUT_BYTES: 1_000_000,
  MAX_IDLE_TIMEOUT_S: 86400,
  TENANT_MAX_HIBERNATED_SESSIONS: 100,
  MAX_HIBERNATED_TTL_S: 2592000,
  TENANT_MAX_SNAPSHOTS: 100,
  TENANT_MAX_SNAPSHOT_BYTES: 10 * 1024 ** 3,
  MAX_PROCESSES: 8,
  TENANT_MAX_EVENT_BYTES: 256_000_000,
  TENANT_LLM_CALLS_PER_MINUTE: 600,
  TENANT_LLM_TOKENS_PER_MINUTE: 2_000_000,
  TENANT_LLM_CALLS_PER_DAY: 50_000,
  TENANT_LLM_TOKENS_PER_DAY: 100_000_000,
}

t.test('without overrides every tenant gets the config defaults', async (t) => {
  const p = parseTenantLimits('', CONFIG)
  t.match(p.for('anyone'), {
    max_sessions: 20,
    max_concurrent_executions: 10,
    rate_per_min: 1200,
    max_memory_mb: 2048,
    max_cpus: 2,
    max_pids: 512,
    max_workspace_mb: 256,
    max_exec_timeout_s: 3600,
    max_output_bytes: 1_000_000,
    max_idle_timeout_s: 86400,
  })
})

t.test('a tenant\'s overrides win over "*", which wins over the defaults', async (t) => {
  const p = parseTenantLimits(JSON.stringify({ '*': { rate_per_min: 600, max_sessions: 5 }, acme: { max_sessions: 50, max_memory_mb: 4096 } }), CONFIG)
  t.match(p.for('acme'), { max_sessions: 50, rate_per_min: 600, max_memory_mb: 4096, max_pids: 512 })
  t.match(p.for('other'), { max_sessions: 5, rate_per_min: 600, max_memory_mb: 2048 })
  t.ok(Object.isFrozen(p.for('acme')), 'resolved limits are frozen')
  t.match(parseTenantLimits('{"__proto__": {"max_sessions": 1}}', CONFIG).for('x'), { max_sessions: 20 }, 'no prototype tricks')
})

t.test('bad overrides stop the start with a message naming the tenant and field', async (t) => {
  t.throws(() => parseTenantLimits('{', CONFIG), { name: 'TenantLimitsError' })
  t.throws(() => parseTenantLimits('{"acme": {"max_sesions": 3}}', CONFIG), { message: /acme/ })
  t.throws(() => parseTenantLimits('{"acme": {"max_sessions": 0}}', CONFIG), { message: /\/acme\/max_sessions/ })
  t.throws(() => parseTenantLimits('{"acme": {"max_cpus": "two"}}', CONFIG), { message: /\/acme\/max_cpus/ })
  t.throws(() => parseTenantLimits('{"bad tenant!": {}}', CONFIG), { name: 'TenantLimitsError' })
  t.throws(() => parseTenantLimits('[]', CONFIG), { name: 'TenantLimitsError' })
})

t.test('a request above a ceiling is a 400 limit_exceeded that names the limit', async (t) => {
  const limits = parseTenantLimits('{"small": {"max_memory_mb": 256, "max_exec_timeout_s": 10, "max_output_bytes": 4096}}', CONFIG).for('small')
  t.doesNotThrow(() => checkCeilings(limits, { 'limits.memory_mb': 256, timeout_s: 10, 'limits.output_bytes': 4096 }), 'at the ceiling is fine')
  for (const [name, value, max] of [
    ['limits.memory_mb', 257, 256],
    ['timeout_s', 10.5, 10],
    ['limits.output_bytes', 4097, 4096],
    ['limits.pids', 513, 512],
    ['limits.workspace_mb', 257, 256],
    ['limits.cpus', 2.5, 2],
    ['idle_timeout_s', 86401, 86400],
  ] as const) {
    try {
      checkCeilings(limits, { [name]: value })
      t.fail(`${name}=${value} should be refused`)
    } catch (err) {
      t.ok(err instanceof AppError && err.code === 'limit_exceeded' && err.status === 400, `${name}: limit_exceeded`)
      t.match((err as AppError).extra, { limit: name, maximum: max }, `${name}: names the limit and its maximum`)
    }
  }
})
