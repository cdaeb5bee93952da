// The MCP tools that copy a session's state: snapshot it (kept until deleted or expired), list and
// delete snapshots, and fork a session into independent copies, so an agent can try several
// approaches from one state without rebuilding it. A new session from a snapshot is create_session.
import { Type } from 'typebox'
import { Session, SnapshotId } from '../schemas.js'
import { CreateSnapshotBody, ForkBody } from '../snapshot-schemas.js'
import { closedWorld, json, text, tool } from './tool-def.js'

const snapshotSession = tool({
  name: 'snapshot_session',
  holder: true,
  title: "Snapshot a session's state",
  description:
    "Copy a session's state (variables, imported modules, files in /workspace, processes) into a snapshot kept on the server; the session runs on after a short pause. " +
    'Start a new session from it with create_session {snapshot_id}, as many times as needed. Only runsc sessions can be copied (runc ones answer not_supported).',
  input: Type.Object({ session_id: Session.properties.id, name: CreateSnapshotBody.properties.name }, { additionalProperties: false }),
  annotations: { ...closedWorld, readOnlyHint: false, destructiveHint: false, idempotentHint: false },
  async run(args, ctx) {
    const snap = await ctx.snapshots.take(ctx.tenant, args.session_id, args.name ?? '')
    ctx.log.info({ sessionId: args.session_id, snapshotId: snap.id }, 'mcp: snapshot taken')
    return text(`Snapshot ${snap.id} taken.\n${json(snap)}`)
  },
})

const listSnapshots = tool({
  name: 'list_snapshots',
  title: 'List snapshots',
  description: 'List your snapshots (id, the session it was taken from, name, size, when it expires).',
  input: Type.Object({}, { additionalProperties: false }),
  annotations: { ...closedWorld, readOnlyHint: true },
  async run(_args, ctx) {
    const { snapshots } = await ctx.snapshots.list(ctx.tenant, 200)
    return text(snapshots.length ? json(snapshots) : 'No snapshots. Take one with snapshot_session.')
  },
})

const deleteSnapshot = tool({
  name: 'delete_snapshot',
  title: 'Delete a snapshot',
  description: 'Delete a snapshot and its files; sessions started from it keep running.',
  input: Type.Object({ snapshot_id: SnapshotId }, { additionalProperties: false }),
  annotations: { ...closedWorld, readOnlyHint: false, destructiveHint: true, idempotentHint: true },
  async run(args, ctx) {
    await ctx.snapshots.delete(ctx.tenant, args.snapshot_id)
    return text(`Snapshot ${args.snapshot_id} deleted.`)
  },
})

const forkSession = tool({
  name: 'fork_session',
  holder: true,
  title: 'Fork a session',
  description:
    "Make count (1-16) new sessions, each with this session's state now and independent afterwards (a change in one is seen by no other, nor by this one, which runs on). " +
    'Use it to try several approaches from one state. All or nothing: when one copy cannot be made, none is left.',
  input: Type.Object(
    { session_id: Session.properties.id, count: ForkBody.properties.count, idle_timeout_s: ForkBody.properties.idle_timeout_s },
    { additionalProperties: false },
  ),
  annotations: { ...closedWorld, readOnlyHint: false, destructiveHint: false, idempotentHint: false },
  async run(args, ctx) {
    const sessions = await ctx.snapshots.fork(ctx.tenant, args.session_id, { count: args.count, idle_timeout_s: args.idle_timeout_s }, ctx.authorization)
    ctx.log.info({ sessionId: args.session_id, copies: sessions.map((s) => s.id) }, 'mcp: session forked')
    return text(`${sessions.length} new session(s): ${sessions.map((s) => s.id).join(', ')}.\n${json(sessions)}`)
  },
})

export const SNAPSHOT_TOOLS = [snapshotSession, listSnapshots, deleteSnapshot, forkSession]
