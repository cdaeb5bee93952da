// A fork's copies on other Docker engines (sessions/snapshots.ts): the copy is recorded hibernated
// on that engine, and one of the engine's instances wakes it (or deletes it) on a call of this
// instance's own, signed like a hop (cluster: answered there, never passed on) and carrying the
// client's Authorization header, so that the instance there authenticates the tenant by its key as
// for any request: a hop signature names a method and a path, never a tenant, and is not trusted
// to stand for one.
import type { Cluster } from '../cluster/index.js'
import { AppError, ERRORS, type ErrorCode } from '../errors.js'
import type { Engines, RemoteCopies } from '../sessions/index.js'

type Answer = { status: number; body: unknown }

export function remoteCopies(cluster: Pick<Cluster, 'call'>, engines: Pick<Engines, 'instancesOn'>): RemoteCopies {
  /** Sends the call to each live instance on `engine` in turn until one answers other than 503 (not the holder, stopping). */
  const send = async (engine: string, method: string, path: string, authorization: string): Promise<Answer> => {
    let why = 'no API instance is live there'
    for (const id of await engines.instancesOn(engine)) {
      try {
        const r = await cluster.call(id, method, path, { authorization })
        if (r.status !== 503) return r
        why = detail(r)
      } catch (err) {
        why = (err as Error).message
      }
    }
    throw new AppError('unavailable', `the copy on Docker engine ${engine} could not be reached: ${why}`, { headers: { 'retry-after': '1' } })
  }
  return {
    async wake(engine, sid, authorization) {
      const r = await send(engine, 'POST', `/v1/sessions/${encodeURIComponent(sid)}/wake`, authorization)
      if (r.status !== 200) throw answered(engine, r)
    },
    async delete(engine, sid, authorization) {
      const r = await send(engine, 'DELETE', `/v1/sessions/${encodeURIComponent(sid)}`, authorization)
      if (r.status !== 204 && r.status !== 404) throw answered(engine, r)
    },
  }
}

function detail(r: Answer): string {
  const b = r.body as { detail?: unknown } | null
  return typeof b?.detail === 'string' ? b.detail : `HTTP ${r.status}`
}

/** The other instance's problem as this instance's error (its code when it is one of ours). */
function answered(engine: string, r: Answer): AppError {
  const code = (r.body as { code?: unknown } | null)?.code
  const known = typeof code === 'string' && Object.hasOwn(ERRORS, code) ? (code as ErrorCode) : 'sandbox_failed'
  return new AppError(known, `a copy on Docker engine ${engine}: ${detail(r)}`)
}
