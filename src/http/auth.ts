// Bearer-key authentication (keys kept and compared as SHA-256 hashes, in constant time)
// and the per-tenant request rate limit (rate-limit.ts: counted here, reconciled with Redis).
import { timingSafeEqual } from 'node:crypto'
import type { FastifyRequest } from 'fastify'
import { hashApiKey, type Config } from '../config.js'
import { AppError } from '../errors.js'
import type { LeaseStore } from '../store/lease-store.js'
import type { RateLimiter } from './rate-limit.js'
import { PTY_TOKEN_SCOPE, streamTokenSecret, verifyStreamToken } from './stream-token.js'
import { bindRequestLog } from './request-log.js'

declare module 'fastify' {
  interface FastifyRequest {
    tenant: string
  }
}

function tenantForKey(config: Config, key: string): string | null {
  const presented = Buffer.from(hashApiKey(key), 'hex')
  let found: string | null = null
  for (const [hash, tenant] of config.apiKeys) {
    // Every configured key is compared, so timing does not reveal which one matched.
    if (timingSafeEqual(presented, Buffer.from(hash, 'hex'))) found = tenant
  }
  return found
}

const EVENTS_PATH = /^\/v1\/sessions\/([^/?]+)\/executions\/([^/?]+)\/events(?:\?|$)/
const PTY_PATH = /^\/v1\/sessions\/([^/?]+)\/pty(?:\?|$)/

/** Routes that need a key (decided on the matched route's template, never on the raw URL). */
export function isAuthenticatedRoute(routeUrl: string | undefined): boolean {
  // /mcp: the MCP endpoint (routes/mcp.ts) takes the same keys. GET / (the playground page) is open; what it calls is not.
  return routeUrl === '/mcp' || (routeUrl?.startsWith('/v1/') ?? false)
}

/** `passedOn`: a request another instance passed on, already counted against the tenant's rate there. */
export function authenticate(
  config: Config,
  leases: Pick<LeaseStore, 'sharedSecret'>,
  rate: RateLimiter,
  passedOn: (request: FastifyRequest) => boolean = () => false,
  now: () => number = Date.now,
) {
  const secret = streamTokenSecret(leases)
  return async (request: FastifyRequest): Promise<void> => {
    const header = request.headers.authorization ?? ''
    const m = /^Bearer\s+(\S+)\s*$/i.exec(header)
    let tenant = m?.[1] ? tenantForKey(config, m[1]) : null
    // Only one token: ?access_token=a&access_token=b arrives as an array, and is no token at all.
    const query = request.query as { access_token?: unknown } | undefined
    const token = !header && request.method === 'GET' && typeof query?.access_token === 'string' ? query.access_token : undefined
    const events = EVENTS_PATH.exec(request.url)
    const pty = PTY_PATH.exec(request.url)
    if (token && events?.[1] && events[2]) {
      tenant = verifyStreamToken(await secret(), token, decodeURIComponent(events[1]), decodeURIComponent(events[2]))
    } else if (token && pty?.[1]) {
      tenant = verifyStreamToken(await secret(), token, decodeURIComponent(pty[1]), PTY_TOKEN_SCOPE)
    }
    if (!tenant)
      throw new AppError('unauthorized', m ? 'the API key is not valid' : 'send Authorization: Bearer <api key>', { headers: { 'www-authenticate': 'Bearer' } })
    request.tenant = tenant
    bindRequestLog(request, { tenant })
    if (passedOn(request)) return
    const perMinute = config.tenantLimits.for(tenant).rate_per_min
    const { ok, resetMs } = await rate.take(tenant, perMinute, now())
    if (!ok) {
      throw new AppError('rate_limited', `more than ${perMinute} requests this minute`, { headers: { 'retry-after': String(Math.ceil(resetMs / 1000)) } })
    }
  }
}
