// The one home of the Docker labels replcast puts on its containers, so leftovers can be found.
export const LABEL = {
  managed: 'replcast.managed',
  deployment: 'replcast.deployment',
  session: 'replcast.session',
  tenant: 'replcast.tenant',
  instance: 'replcast.instance',
  /** The container's memory limit in bytes, so the engine's committed memory is summed without inspecting each. */
  memory: 'replcast.memory',
  /** A warm-pool sandbox (sessions/supply/pool.ts): it has no session or tenant label; Redis records whom it serves once taken. */
  pool: 'replcast.pool',
} as const

export function sandboxLabels(deployment: string, sessionId: string, tenant: string, instance: string, memoryBytes?: number): Record<string, string> {
  return {
    [LABEL.managed]: 'true',
    [LABEL.deployment]: deployment,
    [LABEL.session]: sessionId,
    [LABEL.tenant]: tenant,
    [LABEL.instance]: instance,
    ...(memoryBytes !== undefined ? { [LABEL.memory]: String(memoryBytes) } : {}),
  }
}

/** A warm-pool sandbox's labels: no session and no tenant until one takes it (then Redis says which). */
export function pooledLabels(deployment: string, instance: string, memoryBytes: number): Record<string, string> {
  return {
    [LABEL.managed]: 'true',
    [LABEL.deployment]: deployment,
    [LABEL.instance]: instance,
    [LABEL.memory]: String(memoryBytes),
    [LABEL.pool]: 'true',
  }
}
