// Per-tenant quotas and ceilings: the config's TENANT_* and MAX_* values are the defaults;
// REPLCAST_TENANT_LIMITS (JSON) or REPLCAST_TENANT_LIMITS_FILE overrides them per tenant,
// with "*" overriding them for every tenant not named. Parsed once at start, frozen.
import { Type, type Static } from 'typebox'
import { Value } from 'typebox/value'
import { AppError } from './errors.js'

const PosInt = (description: string) => Type.Integer({ minimum: 1, maximum: 1 << 30, description })
const PosNum = (description: string) => Type.Number({ exclusiveMinimum: 0, maximum: 86400, description })

/** One tenant's overrides; every field optional, unknown fields refused. */
export const TenantLimitsOverride = Type.Object(
  {
    max_sessions: Type.Optional(PosInt('Live sessions')),
    max_concurrent_executions: Type.Optional(PosInt('Executions queued or running at once')),
    rate_per_min: Type.Optional(PosInt('API requests per minute')),
    max_memory_mb: Type.Optional(Type.Integer({ minimum: 32, maximum: 1 << 20, description: 'Ceiling for limits.memory_mb' })),
    max_cpus: Type.Optional(Type.Number({ minimum: 0.05, maximum: 256, description: 'Ceiling for limits.cpus' })),
    max_pids: Type.Optional(Type.Integer({ minimum: 8, maximum: 1 << 20, description: 'Ceiling for limits.pids' })),
    max_workspace_mb: Type.Optional(PosInt('Ceiling for the workspace size')),
    max_exec_timeout_s: Type.Optional(PosNum("Ceiling for an execution's timeout_s")),
    max_output_bytes: Type.Optional(Type.Integer({ minimum: 1024, maximum: 1 << 30, description: 'Ceiling for output bytes per execution' })),
    max_idle_timeout_s: Type.Optional(PosInt('Ceiling for idle_timeout_s')),
    max_hibernated_sessions: Type.Optional(PosInt('Hibernated sessions (not counted in max_sessions)')),
    max_hibernated_ttl_s: Type.Optional(PosInt('Ceiling for hibernated_ttl_s')),
    max_snapshots: Type.Optional(PosInt('Snapshots kept at once')),
    max_snapshot_bytes: Type.Optional(Type.Integer({ minimum: 1024 * 1024, maximum: 2 ** 50, description: "Bytes of the snapshots' checkpoint files in all" })),
    max_processes: Type.Optional(Type.Integer({ minimum: 1, maximum: 1024, description: 'Background processes running at once in one session' })),
    max_event_bytes: Type.Optional(
      Type.Integer({
        minimum: 1024,
        maximum: 2 ** 40,
        description: 'Bytes of execution event logs kept in Redis for the tenant; past it the oldest ended logs go first, then live output is truncated',
      }),
    ),
    llm_calls_per_minute: Type.Optional(PosInt('LLM calls (turn replies and llm_query prompts) per minute')),
    llm_tokens_per_minute: Type.Optional(PosInt('LLM tokens (prompt and completion) per minute')),
    llm_calls_per_day: Type.Optional(PosInt('LLM calls per day (UTC)')),
    llm_tokens_per_day: Type.Optional(PosInt('LLM tokens per day (UTC)')),
  },
  { additionalProperties: false },
)

const TenantLimitsMap = Type.Record(Type.String({ pattern: '^(\\*|[A-Za-z0-9_.-]{1,64})$' }), TenantLimitsOverride, { additionalProperties: false })

export type TenantLimits = Required<Static<typeof TenantLimitsOverride>>

/** The config values that are the defaults (a subset of Config, so tests can pass a literal). */
export interface TenantDefaultsSource {
  TENANT_MAX_SESSIONS: number
  TENANT_MAX_CONCURRENT_EXECUTIONS: number
  TENANT_RATE_PER_MIN: number
  MAX_MEMORY_MB: number
  MAX_CPUS: number
  MAX_PIDS: number
  MAX_WORKSPACE_MB: number
  MAX_EXEC_TIMEOUT_S: number
  MAX_OUTPUT_BYTES: number
  MAX_IDLE_TIMEOUT_S: number
  TENANT_MAX_HIBERNATED_SESSIONS: number
  MAX_HIBERNATED_TTL_S: number
  TENANT_MAX_SNAPSHOTS: number
  TENANT_MAX_SNAPSHOT_BYTES: number
  MAX_PROCESSES: number
  TENANT_MAX_EVENT_BYTES: number
  TENANT_LLM_CALLS_PER_MINUTE: number
  TENANT_LLM_TOKENS_PER_MINUTE: number
  TENANT_LLM_CALLS_PER_DAY: number
  TENANT_LLM_TOKENS_PER_DAY: number
}

export class TenantLimitsError extends Error {
  override name = 'TenantLimitsError'
}

export class TenantPolicy {
  private readonly resolved = new Map<string, TenantLimits>()
  private readonly fallback: TenantLimits

  constructor(
    defaults: TenantLimits,
    private readonly overrides: Readonly<Record<string, Static<typeof TenantLimitsOverride>>> = {},
  ) {
    this.fallback = Object.freeze({ ...defaults, ...(overrides['*'] ?? {}) })
  }

  /** The tenant's effective limits: its overrides over "*" over the config defaults. */
  for(tenant: string): TenantLimits {
    let r = this.resolved.get(tenant)
    if (!r) {
      r = Object.freeze({ ...this.fallback, ...(Object.hasOwn(this.overrides, tenant) ? this.overrides[tenant] : {}) })
      this.resolved.set(tenant, r)
    }
    return r
  }
}

function defaultsFromConfig(c: TenantDefaultsSource): TenantLimits {
  return {
    max_sessions: c.TENANT_MAX_SESSIONS,
    max_concurrent_executions: c.TENANT_MAX_CONCURRENT_EXECUTIONS,
    rate_per_min: c.TENANT_RATE_PER_MIN,
    max_memory_mb: c.MAX_MEMORY_MB,
    max_cpus: c.MAX_CPUS,
    max_pids: c.MAX_PIDS,
    max_workspace_mb: c.MAX_WORKSPACE_MB,
    max_exec_timeout_s: c.MAX_EXEC_TIMEOUT_S,
    max_output_bytes: c.MAX_OUTPUT_BYTES,
    max_idle_timeout_s: c.MAX_IDLE_TIMEOUT_S,
    max_hibernated_sessions: c.TENANT_MAX_HIBERNATED_SESSIONS,
    max_hibernated_ttl_s: c.MAX_HIBERNATED_TTL_S,
    max_snapshots: c.TENANT_MAX_SNAPSHOTS,
    max_snapshot_bytes: c.TENANT_MAX_SNAPSHOT_BYTES,
    max_processes: c.MAX_PROCESSES,
    max_event_bytes: c.TENANT_MAX_EVENT_BYTES,
    llm_calls_per_minute: c.TENANT_LLM_CALLS_PER_MINUTE,
    llm_tokens_per_minute: c.TENANT_LLM_TOKENS_PER_MINUTE,
    llm_calls_per_day: c.TENANT_LLM_CALLS_PER_DAY,
    llm_tokens_per_day: c.TENANT_LLM_TOKENS_PER_DAY,
  }
}

/**
 * Parses REPLCAST_TENANT_LIMITS, e.g. `{"*": {"rate_per_min": 600}, "acme": {"max_sessions": 50, "max_memory_mb": 4096}}`.
 * Throws TenantLimitsError naming the offending tenant and field.
 */
export function parseTenantLimits(json: string, config: TenantDefaultsSource): TenantPolicy {
  const defaults = defaultsFromConfig(config)
  if (!json.trim()) return new TenantPolicy(defaults)
  let raw: unknown
  try {
    raw = JSON.parse(json)
  } catch (e) {
    throw new TenantLimitsError(`REPLCAST_TENANT_LIMITS is not valid JSON: ${(e as Error).message}`)
  }
  const err = Value.Errors(TenantLimitsMap, raw)[0]
  if (err) throw new TenantLimitsError(`invalid REPLCAST_TENANT_LIMITS${err.instancePath ? ` at ${err.instancePath}` : ''}: ${err.message}`)
  return new TenantPolicy(defaults, raw as Record<string, Static<typeof TenantLimitsOverride>>)
}

/** What a request asks for, by the name the API uses for it. */
export interface RequestedLimits {
  'limits.memory_mb'?: number
  'limits.cpus'?: number
  'limits.pids'?: number
  'limits.workspace_mb'?: number
  'limits.output_bytes'?: number
  idle_timeout_s?: number
  hibernated_ttl_s?: number
  timeout_s?: number
}

const CEILING: Record<keyof RequestedLimits, keyof TenantLimits> = {
  'limits.memory_mb': 'max_memory_mb',
  'limits.cpus': 'max_cpus',
  'limits.pids': 'max_pids',
  'limits.workspace_mb': 'max_workspace_mb',
  'limits.output_bytes': 'max_output_bytes',
  idle_timeout_s: 'max_idle_timeout_s',
  hibernated_ttl_s: 'max_hibernated_ttl_s',
  timeout_s: 'max_exec_timeout_s',
}

/** Throws limit_exceeded (400) naming the first requested value above the tenant's ceiling. */
export function checkCeilings(limits: TenantLimits, requested: RequestedLimits): void {
  for (const [name, value] of Object.entries(requested) as Array<[keyof RequestedLimits, number | undefined]>) {
    const max = limits[CEILING[name]]
    if (value !== undefined && value > max) {
      throw new AppError('limit_exceeded', `${name} is above this tenant's maximum of ${max}`, { extra: { limit: name, maximum: max } })
    }
  }
}
