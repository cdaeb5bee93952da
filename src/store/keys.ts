// The one home of Redis key names. A session's keys share the {sessionId} hash tag,
// so they land in one Cluster slot.

export function redisKeys(prefix: string) {
  return {
    session: (sid: string) => `${prefix}{${sid}}:session`,
    sessionExecutions: (sid: string) => `${prefix}{${sid}}:executions`,
    // The session's executions that are queued or running: added when recorded, removed at their end.
    sessionUnfinished: (sid: string) => `${prefix}{${sid}}:unfinished`,
    sessionOlder: (sid: string) => `${prefix}{${sid}}:older-executions`,
    execution: (sid: string, eid: string) => `${prefix}{${sid}}:exec:${eid}`,
    events: (sid: string, eid: string) => `${prefix}{${sid}}:events:${eid}`,
    history: (sid: string) => `${prefix}{${sid}}:history`,
    // Background processes (src/store/process-store.ts): the session's processes scored by their start,
    // those running, and each one's record (built in Lua too, process-scripts.ts). A process's output
    // is an event log like an execution's, `events(sid, pid)`, counted and dropped the same way.
    sessionProcesses: (sid: string) => `${prefix}{${sid}}:processes`,
    sessionRunningProcesses: (sid: string) => `${prefix}{${sid}}:running-processes`,
    process: (sid: string, pid: string) => `${prefix}{${sid}}:process:${pid}`,
    lease: (sid: string) => `${prefix}{${sid}}:lease`,
    // The lease's term: a number that grows whenever the lease passes to another holder (or is taken
    // when free). A holder's writes carry the term it took the lease with (src/store/lease-store.ts).
    // Built in Lua too, as this builds it (log-scripts.ts).
    leaseTerm: (sid: string) => `${prefix}{${sid}}:lease-term`,
    tenantSessions: (tenant: string) => `${prefix}tenant:${tenant}:sessions`,
    // Its hibernated sessions (counted against max_hibernated_sessions instead of max_sessions; a session
    // is in one set or the other, in both only while it is being hibernated).
    tenantHibernated: (tenant: string) => `${prefix}tenant:${tenant}:hibernated`,
    // Snapshots (src/store/snapshot-store.ts): each one's record, the tenant's ids and the bytes they
    // hold, and every snapshot by its expiry time.
    snapshot: (id: string) => `${prefix}snapshot:${id}`,
    tenantSnapshots: (tenant: string) => `${prefix}tenant:${tenant}:snapshots`,
    tenantSnapshotBytes: (tenant: string) => `${prefix}tenant:${tenant}:snapshot-bytes`,
    snapshotExpiries: () => `${prefix}snapshot-expiries`,
    tenantRunning: (tenant: string) => `${prefix}tenant:${tenant}:running`,
    tenantRate: (tenant: string, window: number) => `${prefix}tenant:${tenant}:rate:${window}`,
    // One hash tag per tenant: the LLM budget's script reads and writes the four windows together.
    tenantLlm: (tenant: string, counter: 'calls' | 'tokens', window: string) => `${prefix}{tenant:${tenant}}:llm-${counter}:${window}`,
    // What the tenant's event logs hold in Redis (src/store/event-bytes.ts): the total, each log's
    // bytes, its ended logs by expiry time, and the bytes refused per log that is being truncated.
    tenantEventBytes: (tenant: string) => `${prefix}tenant:${tenant}:event-bytes`,
    tenantLogBytes: (tenant: string) => `${prefix}tenant:${tenant}:log-bytes`,
    tenantEndedLogs: (tenant: string) => `${prefix}tenant:${tenant}:ended-logs`,
    tenantTruncatedLogs: (tenant: string) => `${prefix}tenant:${tenant}:truncated-logs`,
    instanceSessions: (iid: string) => `${prefix}instance:${iid}:sessions`,
    // The warm pool (src/sessions/supply/pool.ts): an instance's heartbeat while it keeps pooled sandboxes,
    // and which session took each pooled container (container id → session id).
    instancePool: (iid: string) => `${prefix}instance:${iid}:pool`,
    poolBindings: () => `${prefix}pool-bindings`,
    // Docker engines (src/store/engine-store.ts): the live ones scored by when their latest report
    // lapses, each one's capacity as its instances report it, and its instances by when theirs lapses.
    engines: () => `${prefix}engines`,
    engine: (eid: string) => `${prefix}engine:${eid}`,
    engineInstances: (eid: string) => `${prefix}engine:${eid}:instances`,
    // The instance directory (src/cluster/): each live instance's heartbeat (a hash: advertised URL,
    // start time; it expires unless renewed), every instance ever seen (until its sessions are taken
    // over), the channel on which a stopping instance says it handed its sessions over, and the
    // keys that sign requests passed between instances (src/cluster/hop-auth.ts: newest first).
    instanceHeartbeat: (iid: string) => `${prefix}instance:${iid}:heartbeat`,
    instances: () => `${prefix}instances`,
    clusterChannel: () => `${prefix}cluster`,
    internalKeys: () => `${prefix}internal-keys`,
    deadlines: () => `${prefix}deadlines`,
    secret: () => `${prefix}stream-token-secret`,
  }
}

export type RedisKeys = ReturnType<typeof redisKeys>
