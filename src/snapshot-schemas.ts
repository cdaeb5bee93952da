// Request and response shapes of snapshots and fork (POST /v1/sessions/{id}/snapshots, /v1/snapshots,
// POST /v1/sessions/{id}/fork). Registered as OpenAPI components in http/openapi-doc.ts.
import { Type, type Static } from 'typebox'
import { Metadata, ref, Runtime, Session, SessionId, SnapshotId } from './schemas.js'

export const CreateSnapshotBody = Type.Object(
  { name: Type.Optional(Type.String({ maxLength: 200, description: 'A label of your own' })) },
  { $id: 'CreateSnapshotRequest', additionalProperties: false },
)

export const Snapshot = Type.Object(
  {
    id: SnapshotId,
    session_id: { ...SessionId, description: 'The session it was taken from (which may be gone since)' },
    name: Type.String(),
    created_at: Type.String({ format: 'date-time' }),
    expires_at: Type.String({ format: 'date-time', description: 'When it is deleted with its checkpoint unless deleted before' }),
    bytes: Type.Integer({ minimum: 0, description: 'Bytes of its checkpoint on disk (counted in max_snapshot_bytes)' }),
    runtime: ref(Runtime),
    template: Type.String({ description: 'The sandbox template of the session it was taken from' }),
  },
  { $id: 'Snapshot', additionalProperties: false },
)

export const SnapshotList = Type.Object(
  {
    snapshots: Type.Array(ref(Snapshot)),
    next_cursor: Type.Union([Type.String(), Type.Null()], { description: 'Pass as ?cursor= for the next page; null at the end' }),
  },
  { $id: 'SnapshotList' },
)

export const ForkBody = Type.Object(
  {
    count: Type.Optional(Type.Integer({ minimum: 1, maximum: 16, description: 'How many copies (default 1)' })),
    idle_timeout_s: Type.Optional(Type.Integer({ minimum: 1, description: "Each copy's idle seconds before it is reaped (default: the parent's)" })),
    metadata: Type.Optional(Metadata),
  },
  { $id: 'ForkRequest', additionalProperties: false },
)

export const ForkResult = Type.Object({ sessions: Type.Array(ref(Session)) }, { $id: 'ForkResult', additionalProperties: false })

export type SnapshotT = Static<typeof Snapshot>
export type ForkBodyT = Static<typeof ForkBody>
