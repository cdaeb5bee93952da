// Per-tenant LLM spend, across executions, turns and API instances: calls and tokens per minute
// and per UTC day, counted in Redis in fixed windows. A call reserves before it is made (its
// prompt's estimate plus the completion it may ask for) and is settled after with what it spent:
// the use the model reports, else its callers' estimate. Spend is charged when it is spent: a
// request that left and was abandoned, timed out or failed without saying keeps its whole grant
// (the model may have made, and billed, the completion), and each attempt reserves on its own.
import type { Redis } from 'ioredis'
import type { Logger } from 'pino'
import type { RedisKeys } from '../store/keys.js'
import type { TenantLimits, TenantPolicy } from '../tenants.js'
import { LlmBudgetError } from './errors.js'

const MINUTE_MS = 60_000
const DAY_MS = 86_400_000
/** Counters outlive their window, so a call that ends after it settles against the window it was charged to. */
const MINUTE_TTL_S = 15 * 60
const DAY_TTL_S = 2 * 86_400
/**
 * A refusal that found nothing left is remembered this long: `while True: llm_query(...)` past
 * the budget is answered without a Redis round trip each time (a refund by a settling call may
 * free room a little later than it could have).
 */
const REFUSAL_MEMORY_MS = 1000

/** The four counters, in the order the scripts use them. */
const COUNTERS = [
  { what: 'llm_calls', unit: 'calls', window: 'minute', limit: 'llm_calls_per_minute' },
  { what: 'llm_tokens', unit: 'tokens', window: 'minute', limit: 'llm_tokens_per_minute' },
  { what: 'llm_calls', unit: 'calls', window: 'day', limit: 'llm_calls_per_day' },
  { what: 'llm_tokens', unit: 'tokens', window: 'day', limit: 'llm_tokens_per_day' },
] as const satisfies ReadonlyArray<{ what: string; unit: string; window: string; limit: keyof TenantLimits }>

// KEYS: calls/minute, tokens/minute, calls/day, tokens/day. ARGV: calls, least tokens, most tokens,
// the four limits, the two TTLs. Grants the calls and as many tokens as every window has left,
// up to the most asked, or nothing: {1, tokens granted} or {0, counter refused (1-4), what it has left}.
const RESERVE = `
local calls, least, most = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local used, limit = {}, {}
for i = 1, 4 do
  used[i] = tonumber(redis.call('GET', KEYS[i]) or '0')
  limit[i] = tonumber(ARGV[3 + i])
end
if calls > 0 then
  for _, i in ipairs({1, 3}) do
    if used[i] + calls > limit[i] then return {0, i, limit[i] - used[i]} end
  end
end
local grant, tightest = most, 0
for _, i in ipairs({2, 4}) do
  if limit[i] - used[i] < grant then grant, tightest = limit[i] - used[i], i end
end
if grant < least then return {0, tightest, grant} end
local add = {calls, grant, calls, grant}
for i = 1, 4 do
  if add[i] > 0 then
    redis.call('INCRBY', KEYS[i], add[i])
    if redis.call('TTL', KEYS[i]) < 0 then redis.call('EXPIRE', KEYS[i], i <= 2 and ARGV[8] or ARGV[9]) end
  end
end
return {1, grant}
`

// KEYS: the token counters a reservation was charged to. ARGV: the difference to apply. A counter
// that has expired stays gone (recreating it would leave a key without an expiry).
const SETTLE = `
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then redis.call('INCRBY', KEYS[i], ARGV[1]) end
end
return 1
`

export interface BudgetRequest {
  /** Calls to charge (llm_batch of n charges n). */
  calls: number
  /** Fewest tokens that make the call worth making (its prompt's estimate and some completion). */
  minTokens: number
  /** Most tokens it may use (its prompt's estimate and the largest completion it would ask for). */
  maxTokens: number
}

export interface Reservation {
  /** Tokens granted, between the request's minTokens and maxTokens. */
  readonly tokens: number
  /** Replaces the tokens reserved with those the call used (the grant itself keeps them all). Never throws. */
  settle(usedTokens: number): Promise<void>
}

export class LlmBudget {
  private readonly refusals = new Map<string, { until: number; counter: number }>()

  constructor(
    private readonly redis: Redis,
    private readonly keys: RedisKeys,
    private readonly policy: TenantPolicy,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  /** Reserves calls and tokens from every window of the tenant's budget. Throws LlmBudgetError. */
  async reserve(tenant: string, want: BudgetRequest): Promise<Reservation> {
    const now = this.now()
    const remembered = this.refusals.get(tenant)
    if (remembered && remembered.until > now) {
      const isCalls = COUNTERS[remembered.counter]!.unit === 'calls'
      if ((isCalls && want.calls > 0) || (!isCalls && want.minTokens > 0)) throw this.refusal(tenant, remembered.counter, now)
    }
    const limits = this.policy.for(tenant)
    const keys = this.windowKeys(tenant, now)
    const r = (await this.redis.eval(
      RESERVE,
      4,
      ...keys,
      want.calls,
      want.minTokens,
      want.maxTokens,
      ...COUNTERS.map((c) => limits[c.limit]),
      MINUTE_TTL_S,
      DAY_TTL_S,
    )) as number[]
    if (r[0] !== 1) {
      const counter = r[1]! - 1
      if (r[2]! <= 0) this.refusals.set(tenant, { until: now + REFUSAL_MEMORY_MS, counter })
      throw this.refusal(tenant, counter, now)
    }
    const granted = r[1]!
    const tokenKeys = [keys[1]!, keys[3]!]
    return {
      tokens: granted,
      settle: async (used) => {
        const delta = Math.round(used) - granted
        if (delta === 0) return
        await this.redis.eval(SETTLE, 2, ...tokenKeys, delta).then(
          () => undefined,
          (err: unknown) => this.log.warn({ err, tenant }, 'could not settle an LLM call against the tenant budget'),
        )
      },
    }
  }

  /** Throws LlmBudgetError when any window of the tenant's budget has no call or no token left (a new turn's first look). */
  async check(tenant: string): Promise<void> {
    const now = this.now()
    const remembered = this.refusals.get(tenant)
    if (remembered && remembered.until > now) throw this.refusal(tenant, remembered.counter, now)
    const limits = this.policy.for(tenant)
    const used = await this.redis.mget(...this.windowKeys(tenant, now))
    const counter = COUNTERS.findIndex((c, i) => Number(used[i] ?? 0) >= limits[c.limit])
    if (counter >= 0) throw this.refusal(tenant, counter, now)
  }

  private windowKeys(tenant: string, now: number): string[] {
    const minute = `m${Math.floor(now / MINUTE_MS)}`
    const day = `d${Math.floor(now / DAY_MS)}`
    return [
      this.keys.tenantLlm(tenant, 'calls', minute),
      this.keys.tenantLlm(tenant, 'tokens', minute),
      this.keys.tenantLlm(tenant, 'calls', day),
      this.keys.tenantLlm(tenant, 'tokens', day),
    ]
  }

  private refusal(tenant: string, counter: number, now: number): LlmBudgetError {
    const c = COUNTERS[counter]!
    const span = c.window === 'minute' ? MINUTE_MS : DAY_MS
    const retryAfterS = Math.max(1, Math.ceil(((Math.floor(now / span) + 1) * span - now) / 1000))
    const limit = this.policy.for(tenant)[c.limit]
    return new LlmBudgetError(`tenant LLM budget exhausted: ${limit} ${c.unit} per ${c.window}; retry after ${retryAfterS} s`, c.what, retryAfterS)
  }
}
