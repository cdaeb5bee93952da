// A new session's limits: what the request asks, within the tenant's ceilings, else the defaults;
// and the sandbox spec they and the config make.
import type { Config } from '../../config.js'
import { AppError } from '../../errors.js'
import type { CreateSessionBodyT, LimitsT } from '../../schemas.js'
import type { SandboxSpec } from '../../sandbox/container-spec.js'
import { checkCeilings } from '../../tenants.js'

/** Memory a session keeps for Python itself when its workspace and /tmp are full. */
const MIN_PROCESS_MEMORY_MB = 64

/** Throws limit_exceeded (400, naming the limit) for a value above a ceiling. */
export function resolveSessionLimits(
  c: Config,
  tenant: string,
  body: CreateSessionBodyT,
): { limits: LimitsT; idle: number; maxSessions: number; hibernatedTtl: number } {
  const tl = c.tenantLimits.for(tenant)
  const req = body.limits ?? {}
  checkCeilings(tl, {
    'limits.memory_mb': req.memory_mb,
    'limits.cpus': req.cpus,
    'limits.pids': req.pids,
    'limits.workspace_mb': req.workspace_mb,
    'limits.output_bytes': req.output_bytes,
    idle_timeout_s: body.idle_timeout_s,
    hibernated_ttl_s: body.hibernated_ttl_s,
  })
  const memory = req.memory_mb ?? Math.min(c.SANDBOX_MEMORY_MB, tl.max_memory_mb)
  // tmpfs pages count against the memory limit: a full disk should be ENOSPC, not an OOM kill.
  const room = Math.max(0, memory - c.SANDBOX_TMP_MB - MIN_PROCESS_MEMORY_MB)
  if (req.workspace_mb !== undefined && req.workspace_mb > room) {
    throw new AppError(
      'limit_exceeded',
      `limits.workspace_mb must leave room for Python in memory_mb (${memory} MiB, of which /tmp takes ${c.SANDBOX_TMP_MB}): at most ${room}`,
      { extra: { limit: 'limits.workspace_mb', maximum: room } },
    )
  }
  const limits = {
    memory_mb: memory,
    cpus: req.cpus ?? Math.min(c.SANDBOX_CPUS, tl.max_cpus),
    pids: req.pids ?? Math.min(c.SANDBOX_PIDS, tl.max_pids),
    workspace_mb: req.workspace_mb ?? Math.max(1, Math.min(c.SANDBOX_WORKSPACE_MB, tl.max_workspace_mb, Math.floor(memory / 2))),
    output_bytes: req.output_bytes ?? Math.min(c.MAX_STREAM_BYTES, tl.max_output_bytes),
  }
  return {
    limits,
    idle: body.idle_timeout_s ?? Math.min(c.IDLE_TIMEOUT_S, tl.max_idle_timeout_s),
    maxSessions: tl.max_sessions,
    hibernatedTtl: body.hibernated_ttl_s ?? Math.min(c.HIBERNATED_TTL_S, tl.max_hibernated_ttl_s),
  }
}

/** What a sandbox is started with, from the config and a session's resolved limits. */
export function sandboxSpec(
  c: Config,
  s: { sessionId: string; tenant: string; runtime: SandboxSpec['runtime']; limits: LimitsT; env: Record<string, string> },
): SandboxSpec {
  return {
    sessionId: s.sessionId,
    tenant: s.tenant,
    instance: c.instanceId,
    deployment: c.REPLCAST_DEPLOYMENT,
    image: c.SANDBOX_IMAGE,
    runtime: s.runtime,
    user: c.SANDBOX_USER,
    memoryMb: s.limits.memory_mb,
    cpus: s.limits.cpus,
    pids: s.limits.pids,
    workspaceMb: s.limits.workspace_mb,
    tmpMb: c.SANDBOX_TMP_MB,
    nofile: c.SANDBOX_NOFILE,
    maxStreamBytes: s.limits.output_bytes,
    maxImageBytes: c.MAX_IMAGE_BYTES,
    env: s.env,
  }
}
