// The one home of Redis key names. A session's keys share the {sessionId} hash tag,
// so they land in one Cluster slot.

export function redisKeys(prefix: string) {
  return {
    session: (sid: string) => `${prefix}{${sid}}:session`,
    sessionExecutions: (sid: string) => `${prefix}{${sid}}:executions`,
    execution: (sid: string, eid: string) => `${prefix}{${sid}}:exec:${eid}`,
    events: (sid: string, eid: string) => `${prefix}{${sid}}:events:${eid}`,
    history: (sid: string) => `${prefix}{${sid}}:history`,
    lease: (sid: string) => `${prefix}{${sid}}:lease`,
    tenantSessions: (tenant: string) => `${prefix}tenant:${tenant}:sessions`,
    tenantRunning: (tenant: string) => `${prefix}tenant:${tenant}:running`,
    tenantRate: (tenant: string, window: number) => `${prefix}tenant:${tenant}:rate:${window}`,
    instanceSessions: (iid: string) => `${prefix}instance:${iid}:sessions`,
    deadlines: () => `${prefix}deadlines`,
    secret: () => `${prefix}stream-token-secret`,
  }
}

export type RedisKeys = ReturnType<typeof redisKeys>
