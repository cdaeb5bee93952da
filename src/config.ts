// The service's configuration: one schema read from the environment once at start,
// validated (a bad value stops the process naming the variable) and frozen.
import { Type, type Static } from 'typebox'
import { Value } from 'typebox/value'
import { readFileSync } from 'node:fs'
import { createHash } from 'node:crypto'
import { hostname } from 'node:os'
import { parseTenantLimits, TenantLimitsError, type TenantPolicy } from './tenants.js'
import { parseTemplates, TemplatesError } from './templates.js'

const Int = (def: number, min: number, max: number, description: string) => Type.Integer({ default: def, minimum: min, maximum: max, description })
const Num = (def: number, min: number, max: number, description: string) => Type.Number({ default: def, minimum: min, maximum: max, description })
const Str = (def: string, description: string) => Type.String({ default: def, description })

/** Variable name → schema. Defaults are the documented defaults (docs/configuration.md). */
export const ConfigSchema = Type.Object({
  HOST: Str('127.0.0.1', 'Address the API listens on'),
  PORT: Int(8080, 0, 65535, 'Port the API listens on'),
  LOG_LEVEL: Type.Union(
    [
      Type.Literal('fatal'),
      Type.Literal('error'),
      Type.Literal('warn'),
      Type.Literal('info'),
      Type.Literal('debug'),
      Type.Literal('trace'),
      Type.Literal('silent'),
    ],
    { default: 'info', description: 'pino log level' },
  ),
  REDIS_URL: Str('redis://127.0.0.1:6379', 'Redis connection URL (redis:// or rediss://), or the path of its unix socket (/path/redis.sock)'),
  REDIS_SENTINELS: Str(
    '',
    'Redis Sentinel addresses, host:port comma-separated; when set the master is found through them (REDIS_URL then gives only credentials and database)',
  ),
  REDIS_SENTINEL_NAME: Str('mymaster', 'The master name the sentinels monitor'),
  REPLCAST_KEY_PREFIX: Str('replcast:', 'Prefix of every Redis key'),
  DOCKER_HOST: Str('', 'Docker engine address (unix:///path or tcp://host:port); empty = local socket'),
  REPLCAST_API_KEYS: Str('', 'tenant=key pairs, comma-separated'),
  REPLCAST_API_KEYS_FILE: Str('', 'File with one tenant=key per line (adds to REPLCAST_API_KEYS)'),
  REPLCAST_INSTANCE_ID: Str('', 'Stable id of this API instance (default hostname:port); a restarted instance re-adopts its sessions at once'),
  REPLCAST_ADVERTISE_URL: Str(
    '',
    "URL at which other API instances reach this one (default http://HOST:PORT, with this host's name when HOST is 0.0.0.0 or ::)",
  ),
  REPLCAST_INTERNAL_SECRET: Str(
    '',
    'Keys that sign requests one API instance passes to another (never logged), comma-separated: the first signs, every one verifies; empty: keys kept in Redis and rotated every INTERNAL_KEY_ROTATE_S',
  ),
  INTERNAL_KEY_ROTATE_S: Int(3600, 60, 30 * 86400, 'How often the hop keys kept in Redis are replaced (a replaced key verifies until two newer ones exist)'),
  INSTANCE_HEARTBEAT_MS: Int(
    1000,
    50,
    600000,
    'How often an API instance renews its heartbeat in Redis; its sessions are taken over when it misses three (at most LEASE_TTL_MS)',
  ),
  REPLCAST_DEPLOYMENT: Str('default', 'Label value separating deployments sharing one Docker engine'),
  SANDBOX_IMAGE: Str('replcast-sandbox:latest', 'Sandbox image'),
  SANDBOX_RUNTIME: Type.Union([Type.Literal('runc'), Type.Literal('runsc')], {
    default: 'runsc',
    description:
      'Default container runtime: runsc (gVisor: a kernel of its own between sandbox code and the host; hibernate, snapshots and fork) or runc (less memory per awake session, no checkpoints)',
  }),
  SANDBOX_USER: Str('1000:1000', 'uid:gid the REPL runs as'),
  SANDBOX_MEMORY_MB: Int(512, 32, 1 << 20, 'Default memory limit per sandbox (no swap)'),
  SANDBOX_CPUS: Num(1, 0.05, 256, 'Default CPU limit per sandbox'),
  SANDBOX_PIDS: Int(128, 8, 1 << 20, 'Default process/thread limit per sandbox'),
  SANDBOX_WORKSPACE_MB: Int(256, 1, 1 << 20, 'Size of the /workspace tmpfs'),
  SANDBOX_TMP_MB: Int(64, 1, 1 << 20, 'Size of the /tmp tmpfs'),
  SANDBOX_NOFILE: Int(1024, 64, 1 << 20, 'Open-file limit in the sandbox'),
  SANDBOX_START_TIMEOUT_MS: Int(30000, 1000, 600000, 'How long a new sandbox may take to say ready'),
  SANDBOX_TEMPLATES: Str('', 'More images a session may start from: name=image pairs, comma-separated (the template "default" is SANDBOX_IMAGE)'),
  SANDBOX_POOL_SIZE: Int(4, 0, 256, 'Started sandboxes each API instance keeps ready for sessions with the default template, runtime and limits (0: none)'),
  SANDBOX_INPUT_BUFFER_BYTES: Int(
    32 * 1024 * 1024,
    1024,
    1 << 30,
    'Bytes the API buffers for a sandbox that does not read its input; past it the session is ended',
  ),
  SANDBOX_PROTOCOL_VIOLATIONS: Int(
    1000,
    1,
    1 << 30,
    'Protocol violations (invalid lines, sequence gaps, oversized frames) a sandbox may make within 10 s before its session is ended as hostile',
  ),
  SANDBOX_OUTPUT_BYTES_PER_S: Int(
    4 * 1024 * 1024,
    64 * 1024,
    2 ** 40,
    "Bytes of one sandbox's output the API handles per second while other sandboxes' output is handled too (past it the sandbox's writes wait, so a flood slows only itself); a sandbox writing alone is not held back",
  ),
  HOST_MEMORY_SHARE: Num(
    0.8,
    0.05,
    4,
    "Share of the Docker host's memory that its sandboxes' memory limits may add up to; past it new sessions answer 503 capacity. Above 1 it overcommits (a limit is a ceiling: an idle session uses a few MiB; under pressure the OOM killer picks sandboxes first)",
  ),
  DOCKER_TIMEOUT_MS: Int(30000, 100, 600000, 'Timeout of one Docker engine call (create, start, inspect, kill, remove, list, exec)'),
  FILE_STALL_TIMEOUT_MS: Int(
    30000,
    100,
    600000,
    "How long a workspace file operation may wait on its sandbox without progress (its first answer, each write of an upload, each read of a download, the answer after an upload); past it the request answers 503 unavailable, or a download is cut short, and the sandbox's file program is killed",
  ),
  REDIS_RETRY_MS: Int(
    30000,
    100,
    3600000,
    'How long the end of an execution is retried while Redis fails; past it the session is let go and finished from Redis and its container once Redis is back',
  ),
  MAX_MEMORY_MB: Int(2048, 32, 1 << 20, "Ceiling for a session's memory_mb"),
  MAX_CPUS: Num(2, 0.05, 256, "Ceiling for a session's cpus"),
  MAX_PIDS: Int(512, 8, 1 << 20, "Ceiling for a session's pids"),
  MAX_WORKSPACE_MB: Int(1024, 1, 1 << 20, "Ceiling for a session's workspace_mb"),
  MAX_OUTPUT_BYTES: Int(100_000_000, 1024, 1 << 30, "Ceiling for a session's output_bytes"),
  IDLE_TIMEOUT_S: Int(600, 1, 30 * 86400, 'Default idle time before a session is reaped'),
  MAX_IDLE_TIMEOUT_S: Int(86400, 1, 30 * 86400, "Ceiling for a session's idle_timeout_s"),
  IDLE_ACTION: Type.Union([Type.Literal('delete'), Type.Literal('hibernate')], {
    default: 'delete',
    description: 'What happens to a session at its idle deadline unless it asks (idle_action): deleted, or hibernated (runsc sessions; others are deleted)',
  }),
  HIBERNATED_TTL_S: Int(7 * 86400, 1, 365 * 86400, 'Default time a hibernated session is kept before it is deleted with its checkpoint'),
  MAX_HIBERNATED_TTL_S: Int(30 * 86400, 1, 365 * 86400, "Ceiling for a session's hibernated_ttl_s"),
  TENANT_MAX_HIBERNATED_SESSIONS: Int(100, 1, 1 << 20, 'Hibernated sessions per tenant (they do not count in TENANT_MAX_SESSIONS)'),
  SNAPSHOT_TTL_S: Int(30 * 86400, 1, 3650 * 86400, 'How long a snapshot is kept (its session may be gone) before it is deleted with its checkpoint'),
  TENANT_MAX_SNAPSHOTS: Int(100, 1, 1 << 20, 'Snapshots per tenant'),
  TENANT_MAX_SNAPSHOT_BYTES: Int(10 * 1024 ** 3, 1024 * 1024, 2 ** 50, "Bytes of checkpoint files a tenant's snapshots may hold in all"),
  CHECKPOINT_DIR: Str(
    '.replcast/checkpoints',
    "Where hibernated sessions' checkpoints are kept (owner-only; every API instance on one engine must use the same folder, and one folder shared by every engine's instances lets a hibernated session wake on another engine once its own has no instance left); relative paths start at the working directory",
  ),
  EXEC_TIMEOUT_S: Num(60, 0.1, 86400, 'Default execution timeout'),
  MAX_EXEC_TIMEOUT_S: Num(3600, 0.1, 86400, "Ceiling for an execution's timeout_s"),
  EXEC_QUEUE_DEPTH: Int(8, 0, 1000, 'Executions that may wait behind the running one in a session'),
  MAX_STREAM_BYTES: Int(1_000_000, 1024, 1 << 30, 'Output bytes streamed per execution before dropping'),
  MAX_IMAGE_BYTES: Int(5_000_000, 1024, 1 << 30, 'Bytes per image before dropping'),
  MAX_PROCESSES: Int(8, 1, 1024, 'Background processes that may run at once in one session (per tenant: max_processes in REPLCAST_TENANT_LIMITS)'),
  PROCESS_OUTPUT_BYTES: Int(
    10_000_000,
    1024,
    1 << 30,
    'Output bytes kept per background process; past it its output gets one limit event and the rest is dropped (the process keeps running)',
  ),
  MAX_FILE_BYTES: Int(1 << 30, 1, 2 ** 40, "Largest file one PUT .../files/{path} may upload or one GET download (the session's workspace_mb bounds both too)"),
  MAX_TERMINALS_PER_SESSION: Int(4, 1, 64, 'Terminals (GET /v1/sessions/{id}/pty) one session may have open at once; past it 409 too_many_terminals'),
  TERMINAL_BUFFER_BYTES: Int(
    256 * 1024,
    4096,
    64 * 1024 * 1024,
    "Bytes of a terminal's output the API holds for a client that has not taken them yet; past it the terminal is not read (its shell's writes block) until the client takes half of them",
  ),
  INTERRUPT_GRACE_MS: Int(2000, 50, 600000, 'How long an interrupt may take before the sandbox is killed'),
  EVENT_LOG_MAXLEN: Int(10000, 100, 10_000_000, 'Events kept per execution'),
  EVENT_LOG_TTL_S: Int(3600, 10, 30 * 86400, "How long an ended execution's events are kept"),
  REAPER_INTERVAL_MS: Int(1000, 50, 600000, 'How often idle deadlines are checked'),
  LEASE_TTL_MS: Int(15000, 1000, 600000, 'Session lease held by the instance attached to it'),
  SSE_HEARTBEAT_MS: Int(15000, 100, 600000, 'Heartbeat comment interval on idle SSE streams'),
  BODY_LIMIT_BYTES: Int(10 * 1024 * 1024, 1024, 1 << 30, 'Largest accepted request body'),
  TENANT_MAX_SESSIONS: Int(20, 1, 1 << 20, 'Live sessions per tenant'),
  TENANT_MAX_CONCURRENT_EXECUTIONS: Int(10, 1, 1 << 20, 'Running executions per tenant'),
  TENANT_RATE_PER_MIN: Int(1200, 1, 1 << 30, 'Requests per minute per tenant'),
  TENANT_MAX_EVENT_BYTES: Int(
    256_000_000,
    1024,
    2 ** 40,
    'Bytes of execution event logs a tenant keeps in Redis (oldest ended logs are dropped first, then live output is truncated)',
  ),
  TENANT_LLM_CALLS_PER_MINUTE: Int(600, 1, 1 << 30, 'LLM calls per tenant per minute (turn replies and llm_query prompts), across instances'),
  TENANT_LLM_TOKENS_PER_MINUTE: Int(2_000_000, 1, 2 ** 40, 'LLM tokens per tenant per minute'),
  TENANT_LLM_CALLS_PER_DAY: Int(50_000, 1, 1 << 30, 'LLM calls per tenant per UTC day'),
  TENANT_LLM_TOKENS_PER_DAY: Int(100_000_000, 1, 2 ** 40, 'LLM tokens per tenant per UTC day'),
  REPLCAST_TENANT_LIMITS: Str('', 'Per-tenant overrides of the TENANT_* quotas and MAX_* ceilings, JSON: {"*": {...}, "acme": {"max_sessions": 50}}'),
  REPLCAST_TENANT_LIMITS_FILE: Str('', 'File holding the same JSON (instead of REPLCAST_TENANT_LIMITS)'),
  OPENAI_BASE_URL: Str('', 'OpenAI-compatible endpoint; empty = LLM turns answer 503'),
  OPENAI_API_KEY: Str('', 'Key for the LLM endpoint (never logged)'),
  REPLCAST_MODEL: Str('gpt-4o-mini', 'Default model'),
  REPLCAST_MODELS: Str('', 'Comma-separated allowlist of models a request may choose'),
})

export type Config = Readonly<Static<typeof ConfigSchema>> & {
  readonly apiKeys: ReadonlyMap<string, string>
  readonly instanceId: string
  readonly tenantLimits: TenantPolicy
  /** Template name → image ("default" is SANDBOX_IMAGE). */
  readonly templates: ReadonlyMap<string, string>
  /** REDIS_SENTINELS parsed (empty: REDIS_URL is the master); src/store/redis-connect.ts connects through them. */
  readonly redisSentinels: ReadonlyArray<{ host: string; port: number }>
}

export class ConfigError extends Error {}

export const hashApiKey = (key: string): string => createHash('sha256').update(key).digest('hex')

/** Reads and validates configuration from `env`; throws ConfigError naming the first bad variable. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const raw: Record<string, unknown> = {}
  for (const [name, schema] of Object.entries(ConfigSchema.properties)) {
    const value = env[name]
    if (value === undefined || value === '') continue
    const kind = (schema as { type?: string }).type
    raw[name] = kind === 'integer' || kind === 'number' ? Number(value) : value
  }
  const parsed = Value.Default(ConfigSchema, raw) as Static<typeof ConfigSchema>
  const firstError = Value.Errors(ConfigSchema, parsed)[0]
  if (firstError) {
    const name = firstError.instancePath.replace(/^\//, '') || '(config)'
    throw new ConfigError(`invalid ${name}=${JSON.stringify(env[name] ?? '')}: ${firstError.message}`)
  }
  if (parsed.MAX_MEMORY_MB < parsed.SANDBOX_MEMORY_MB) throw new ConfigError('MAX_MEMORY_MB must be >= SANDBOX_MEMORY_MB')
  if (parsed.MAX_HIBERNATED_TTL_S < parsed.HIBERNATED_TTL_S) throw new ConfigError('MAX_HIBERNATED_TTL_S must be >= HIBERNATED_TTL_S')
  let redisSentinels: Array<{ host: string; port: number }>
  try {
    redisSentinels = parseSentinels(parsed.REDIS_SENTINELS)
  } catch (err) {
    throw new ConfigError(`invalid REDIS_SENTINELS: ${(err as Error).message}`)
  }
  // With sentinels, REDIS_URL gives only credentials and database (src/store/redis-connect.ts).
  if (parsed.REDIS_SENTINELS && !URL.canParse(parsed.REDIS_URL)) {
    throw new ConfigError(`invalid REDIS_URL=${JSON.stringify(parsed.REDIS_URL)}: with REDIS_SENTINELS it must be a redis:// URL, not a socket path`)
  }
  const apiKeys = parseApiKeys(parsed.REPLCAST_API_KEYS, parsed.REPLCAST_API_KEYS_FILE)
  if (apiKeys.size === 0) throw new ConfigError('no API keys: set REPLCAST_API_KEYS=tenant=key or REPLCAST_API_KEYS_FILE')
  const instanceId = parsed.REPLCAST_INSTANCE_ID || `${hostname()}:${parsed.PORT}`
  let tenantLimits: TenantPolicy
  try {
    const json = parsed.REPLCAST_TENANT_LIMITS_FILE ? readFileSync(parsed.REPLCAST_TENANT_LIMITS_FILE, 'utf8') : parsed.REPLCAST_TENANT_LIMITS
    tenantLimits = parseTenantLimits(json, parsed)
  } catch (err) {
    if (err instanceof TenantLimitsError) throw new ConfigError(err.message)
    throw err
  }
  let templates: ReadonlyMap<string, string>
  try {
    templates = parseTemplates(parsed.SANDBOX_TEMPLATES, parsed.SANDBOX_IMAGE)
  } catch (err) {
    if (err instanceof TemplatesError) throw new ConfigError(err.message)
    throw err
  }
  return Object.freeze({ ...parsed, apiKeys, instanceId, tenantLimits, templates, redisSentinels: Object.freeze(redisSentinels) })
}

/** `host:port,host:port` → ioredis's sentinel list (a missing port is Sentinel's 26379); throws on a malformed entry. */
export function parseSentinels(list: string): Array<{ host: string; port: number }> {
  return list
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((s) => {
      // host, host:port, [v6 address]:port
      const m = /^(?:\[([^\]]+)\]|([^:[\]]+))(?::(\d{1,5}))?$/.exec(s)
      if (!m) throw new Error(`invalid sentinel address ${JSON.stringify(s)} (expected host:port)`)
      return { host: (m[1] ?? m[2])!, port: m[3] ? Number(m[3]) : 26379 }
    })
}

/** sha256(key) → tenant. Only hashes are kept; keys never appear in errors or logs. */
function parseApiKeys(inline: string, file: string): Map<string, string> {
  const lines = inline.split(',')
  if (file) lines.push(...readFileSync(file, 'utf8').split('\n'))
  const keys = new Map<string, string>()
  for (const line of lines.map((l) => l.trim()).filter((l) => l && !l.startsWith('#'))) {
    const eq = line.indexOf('=')
    const tenant = line.slice(0, eq).trim()
    const key = line.slice(eq + 1).trim()
    if (eq <= 0 || !key || !/^[A-Za-z0-9_.-]{1,64}$/.test(tenant))
      throw new ConfigError('invalid REPLCAST_API_KEYS entry: expected tenant=key (tenant: letters, digits, _ . -)')
    if (key.length < 8) throw new ConfigError(`API key for tenant ${tenant} is shorter than 8 characters`)
    keys.set(hashApiKey(key), tenant)
  }
  return keys
}
