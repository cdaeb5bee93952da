// The execution machinery's face: what the session lifecycle (src/sessions/) uses of this room.
// The runner is the one owner of execution state; the lifecycle holds it, it does not reach inside.
export { DrivenLogs, type DrivenLog } from './driven-logs.js'
export { newPendingExecution, type EventPayload, type PendingExecution } from './execution.js'
export { ExecutionRunner } from './execution-runner.js'
// How an adoption tells an execution the REPL got from one it never saw: its frames in the sandbox's log.
export { executionFrames } from './log-replay.js'
export type { LiveSession } from './live-session.js'
export type { LlmReply, LlmRequestContext, LlmRequestHandler, RunningExecution } from './llm-requests.js'
export { RecordedExecutions } from './recorded-executions.js'
// What a background process's output shares with an execution's (sessions/processes/): the bound on output Redis has not stored yet.
export { UnstoredOutput } from './unstored-output.js'
