// The one home of the Docker labels replcast puts on its containers, so leftovers can be found.
export const LABEL = {
  managed: 'replcast.managed',
  deployment: 'replcast.deployment',
  session: 'replcast.session',
  tenant: 'replcast.tenant',
  instance: 'replcast.instance',
} as const

export function sandboxLabels(deployment: string, sessionId: string, tenant: string, instance: string): Record<string, string> {
  return { [LABEL.managed]: 'true', [LABEL.deployment]: deployment, [LABEL.session]: sessionId, [LABEL.tenant]: tenant, [LABEL.instance]: instance }
}
