// Several API instances as one service: the instance directory (heartbeats), routing of requests
// that need a session's sandbox to the instance holding it (one signed HTTP hop, hop-auth.ts),
// failover of a gone instance's sessions, and the hand-over of this instance's sessions when it stops.
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Logger } from 'pino'
import type { Config } from '../config.js'
import type { Stores } from '../store/stores.js'
import { ClusterChannel } from './channel.js'
import { InstanceDirectory } from './directory.js'
import { Failover } from './failover.js'
import { FORWARDED_HEADER, Forwarder, HopBody, type HopOutcome } from './forward.js'
import { HopAuth, REFRESH_MS } from './hop-auth.js'
import { route, type Routed, type SessionHolding } from './routing.js'
import { Tunnels } from './upgrade-hop.js'

export { REFUSED_HEADER } from './forward.js'

export interface ClusterDeps {
  config: Config
  /** Who holds each session (leases); the connection and key names for the cluster's own state (directory, failover, channel). */
  stores: Pick<Stores, 'redis' | 'keys' | 'leases'>
  log: Logger
  sessions: SessionHolding & { handOver(): Promise<void> }
}

export interface Cluster {
  /**
   * The heartbeat (first beat and timer), the hop keys, the hand-over channel: before the sessions
   * layer starts, which may re-adopt sessions (while it does, this instance must not look gone).
   */
  start(): Promise<void>
  /** The failover timers: once the sessions layer has started. */
  run(): void
  /** The server listens at `address` (the advertised URL follows it unless configured). */
  listening(address: string | AddressInfo | null): void
  /** Whether another instance of this deployment passed the request on (it carries a valid hop signature for its method and path). */
  isInternal(req: IncomingMessage): boolean
  /** Answers here ('local') or through the session's holder ('forwarded'); throws session_moving. */
  route(r: Routed): Promise<'local' | 'forwarded'>
  /**
   * Passes `req` as it is to the instance at `url` and its answer back on `res` (the public hop, for
   * work placed on another instance: a request already passed on must not be passed on again).
   * `onAnswer` is called just before the answer is written.
   */
  forward(req: IncomingMessage, res: ServerResponse, url: string, onAnswer: () => void): Promise<HopOutcome>
  /**
   * A request of this instance's own to instance `id` (signed like a hop, so it is answered there and
   * never passed on): its status and JSON body. `headers` must carry the client's Authorization: the
   * other instance authenticates the tenant by its key, as for any request. Rejects when `id` is gone
   * or does not answer.
   */
  call(id: string, method: string, path: string, headers: Record<string, string>): Promise<{ status: number; body: unknown }>
  /** Where a live instance is reached (null: its heartbeat is gone). */
  lookup(id: string): Promise<string | null>
  /** Stopping: sessions handed over (leases freed, heartbeat ended, survivors told), hops ended. */
  handOver(): Promise<void>
  close(): Promise<void>
}

export function createCluster(deps: ClusterDeps): Cluster {
  const { config, stores, log, sessions } = deps
  const { redis, keys, leases } = stores
  const directory = new InstanceDirectory({
    redis,
    keys,
    instanceId: config.instanceId,
    heartbeatMs: config.INSTANCE_HEARTBEAT_MS,
    leaseTtlMs: config.LEASE_TTL_MS,
    advertiseUrl: config.REPLCAST_ADVERTISE_URL,
    host: config.HOST,
    port: config.PORT,
  })
  const forwarder = new Forwarder()
  const tunnels = new Tunnels()
  const failover = new Failover({ redis, keys, instanceId: config.instanceId, directory, sessions, log })
  const channel = new ClusterChannel(redis.duplicate({ lazyConnect: true }), keys.clusterChannel(), log)
  const hops = new HopAuth({ configured: config.REPLCAST_INTERNAL_SECRET, redis, key: keys.internalKeys(), rotateMs: config.INTERNAL_KEY_ROTATE_S * 1000 })
  const sign = (method: string, path: string) => hops.sign(method, path)
  const timers: NodeJS.Timeout[] = []
  const holders = new Map<string, string>()
  let stopped = false

  /** Background work under way (passes, take-overs): close waits for it, so none runs on a closed connection. */
  const inFlight = new Set<Promise<unknown>>()
  const track = (work: Promise<unknown>): Promise<void> => {
    const p = work.then(
      () => undefined,
      (err: unknown) => log.warn({ err }, 'cluster background task failed'),
    )
    inFlight.add(p)
    void p.finally(() => inFlight.delete(p))
    return p
  }
  const every = (ms: number, fn: () => Promise<unknown>) => {
    let busy = false
    const t = setInterval(() => {
      if (busy || stopped) return
      busy = true
      void track(fn()).finally(() => {
        busy = false
      })
    }, ms)
    t.unref()
    timers.push(t)
  }

  return {
    async start() {
      // Anyone who can read Redis holds every session already: keys kept there add no exposure.
      await hops.refresh()
      await directory.beat()
      // Beating from now on: re-adopting this instance's sessions may take longer than a heartbeat
      // lives, and others must not take them over meanwhile as if this instance were gone.
      every(config.INSTANCE_HEARTBEAT_MS, () => directory.beat())
      await channel.listen((id) => {
        if (!stopped) void track(failover.takeOverFrom(id))
      })
    },
    run() {
      every(config.REAPER_INTERVAL_MS, () => failover.sweep())
      every(REFRESH_MS, () => hops.refresh())
    },
    listening(address) {
      directory.listening(address)
      if (!stopped) directory.beat().catch((err: unknown) => log.warn({ err }, 'could not advertise this instance'))
    },
    isInternal(req) {
      return hops.verify(req.headers[FORWARDED_HEADER], req.method ?? '', req.url ?? '')
    },
    route(r) {
      return route({ instanceId: config.instanceId, leases, directory, forwarder, tunnels, sessions, log, sign, holders }, r)
    },
    forward(req, res, url, onAnswer) {
      return forwarder.forward(req, res, url, sign, new HopBody(req, 0), onAnswer)
    },
    async call(id, method, path, headers) {
      const url = await directory.lookup(id)
      if (!url) throw new Error(`the API instance ${id} is gone`)
      return forwarder.call(url, method, path, headers, sign)
    },
    lookup: (id) => directory.lookup(id),
    async handOver() {
      if (stopped) return
      stopped = true
      for (const t of timers) clearInterval(t)
      await sessions.handOver()
      // Heartbeat first, then the word: survivors that hear it find this instance gone.
      await directory.end()
      await redis.publish(keys.clusterChannel(), config.instanceId)
      forwarder.close()
      tunnels.close()
    },
    async close() {
      stopped = true
      for (const t of timers) clearInterval(t)
      forwarder.close()
      tunnels.close()
      channel.close()
      await Promise.all(inFlight)
    },
  }
}
