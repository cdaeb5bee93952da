// The sandbox supply's face: what the session lifecycle (src/sessions/) uses of this room: where a
// new session's sandbox comes from (the warm pool or a cold container of its template, under a place
// in the host's memory, or a hibernated session's checkpoint) and which Docker engine a session belongs to.
export { CheckpointMismatch, CheckpointStore, SNAPSHOT_PREFIX, type SealedCheckpoint } from './checkpoint-store.js'
export { endStranded, Engines, SessionOnOtherEngine } from './engines.js'
export { HostCapacity } from './host-capacity.js'
export { WarmPool } from './pool.js'
export { PoolSweep } from './pool-sweep.js'
export { SandboxSource } from './sandbox-source.js'
export { resolveSessionLimits } from './session-limits.js'
export { TemplateImages } from './template-images.js'
