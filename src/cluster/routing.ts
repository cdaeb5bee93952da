// Where a request that needs a session's sandbox is answered: here when this instance holds the
// session (decided in memory, no Redis round trip), by the holder when another live instance holds it
// (one hop), here after taking it over when no live instance does. Races are tried again for a
// bounded time, then answered 503 session_moving.
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Logger } from 'pino'
import { AppError } from '../errors.js'
import type { LeaseStore } from '../store/lease-store.js'
import type { InstanceDirectory } from './directory.js'
import { BufferedBody, HopBody, REFUSED_HEADER, type Forwarder, type HopSigner } from './forward.js'
import type { Tunnels, Upgrade } from './upgrade-hop.js'

/** How long a request waits for a session whose holder is changing before 503 session_moving. */
const MOVE_WAIT_MS = 3000
/** Bytes of a request body kept while a hop is tried, so a refused hop can be tried again. */
const KEEP_BYTES = 1024 * 1024
/** Methods a hop may send again after the holder stopped under them: doing them twice does them once (HTTP's idempotent methods). */
const REPEATABLE = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE'])
/** Sessions whose last holder is remembered (past it the memory starts over). */
const REMEMBERED = 10_000

export interface SessionHolding {
  holds(sid: string): boolean
  takeOver(sid: string, from: string | null): Promise<'attached' | 'elsewhere' | 'unavailable'>
  /** A live instance on the session's Docker engine when that is not this one's (sessions/supply/engines.ts); null: here, or none left. */
  instanceFor?(sid: string): Promise<string | null>
}

export interface RoutingDeps {
  instanceId: string
  leases: Pick<LeaseStore, 'leaseHolder'>
  directory: InstanceDirectory
  forwarder: Forwarder
  /** WebSocket upgrades go to the holder through a tunnel instead (upgrade-hop.ts). */
  tunnels: Tunnels
  sessions: SessionHolding
  log: Logger
  sign: HopSigner
  /**
   * The holder each session's last hop reached, to skip reading the lease next time: a holder that
   * no longer holds the session refuses the hop (or takes the session over if nobody holds it), so
   * a stale entry costs one more try, never a wrong answer.
   */
  holders: Map<string, string>
}

/** One request that needs the sandbox of session `sid`. */
export interface Routed {
  sid: string
  req: IncomingMessage
  res: ServerResponse
  /** The request came from another instance: it is answered here or refused, never passed on. */
  internal: boolean
  /** Called once when the holder's answer starts: the caller stops handling the request itself. */
  onAnswer: () => void
  /** The body, already read by the caller (it named the session): a hop sends these bytes, and 'local' leaves them to the caller. */
  body?: Buffer
  /** A WebSocket upgrade (no body): the holder's 101 joins the client's connection to it. */
  upgrade?: Upgrade
}

const moving = (extra: Record<string, string> = {}) =>
  new AppError('session_moving', 'the session is moving between API instances; try again in a moment', { headers: { 'retry-after': '1', ...extra } })

/** 'local': this instance now holds the session (or none can: the route's own handling answers); 'forwarded': the holder answered. */
export async function route(deps: RoutingDeps, r: Routed): Promise<'local' | 'forwarded'> {
  const { sessions, leases, directory, forwarder, instanceId, log, holders } = deps
  if (sessions.holds(r.sid)) return 'local'
  const body = r.body ? new BufferedBody(r.body) : new HopBody(r.req, KEEP_BYTES)
  const until = Date.now() + MOVE_WAIT_MS
  for (let attempt = 0; ; attempt++) {
    // The holder the last hop reached, at first (see RoutingDeps.holders); then what the lease says.
    const remembered = attempt === 0 ? holders.get(r.sid) : undefined
    holders.delete(r.sid)
    const leased = remembered ?? (await leases.leaseHolder(r.sid))
    let holder = leased
    let url = leased && leased !== instanceId ? await directory.lookup(leased) : null
    if (!url && leased !== instanceId) {
      // No live holder, and the session's sandbox on another Docker engine: an instance there takes it over.
      const there = await sessions.instanceFor?.(r.sid)
      if (there) [holder, url] = [there, await directory.lookup(there)]
    }
    if (!url) {
      // No live holder: take the session over here (exactly one instance wins its lease).
      const got = await sessions.takeOver(r.sid, leased && leased !== instanceId ? leased : null)
      if (got !== 'elsewhere') {
        if (body.started) throw moving() // a hop read some of the body: the route cannot read it again
        return 'local'
      }
    } else if (r.internal) {
      // Passed on to this instance, which no longer holds the session: the sender asks the holder.
      throw moving({ [REFUSED_HEADER]: '1' })
    } else {
      const out = r.upgrade
        ? await deps.tunnels.tunnel(r.req, r.res, r.upgrade, url, deps.sign, r.onAnswer)
        : await forwarder.forward(r.req, r.res, url, deps.sign, body, r.onAnswer)
      if (out.kind === 'answered' || out.kind === 'gone') {
        if (holders.size >= REMEMBERED) holders.clear()
        holders.set(r.sid, holder!)
        return 'forwarded'
      }
      if (out.kind === 'unreachable') {
        directory.forget(holder!)
        if (out.reached && !REPEATABLE.has(r.req.method ?? '')) {
          // The holder stopped with a request it may have acted on (an execution recorded, then run by the
          // next holder): sending it again could do it twice. The client sees a cut, as if it had been
          // connected to the holder, and decides.
          log.warn({ err: out.err, sessionId: r.sid, holder }, 'the session holder stopped during a request that cannot be repeated; its connection is cut')
          r.onAnswer()
          r.res.destroy()
          return 'forwarded'
        }
      }
      if (!body.replayable) break
      if (out.kind === 'unreachable') {
        if (out.reused && attempt < 3) continue // a kept-alive connection the holder had just closed
        log.warn({ err: out.err, sessionId: r.sid, holder }, 'the session holder is unreachable')
      }
    }
    if (Date.now() >= until) break
    await new Promise((resolve) => setTimeout(resolve, Math.min(25 * 2 ** attempt, 250)))
  }
  throw moving()
}
