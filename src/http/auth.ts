// Bearer-key authentication (keys kept and compared as SHA-256 hashes, in constant time)
// and the per-tenant request rate limit, counted in Redis so it holds across instances.
import { timingSafeEqual } from 'node:crypto'
import type { FastifyRequest } from 'fastify'
import { hashApiKey, type Config } from '../config.js'
import { AppError } from '../errors.js'
import type { RedisStore } from '../store/redis-store.js'
import { verifyStreamToken } from './stream-token.js'

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

export function authenticate(config: Config, store: RedisStore) {
  let secret: string | null = null
  return async (request: FastifyRequest): Promise<void> => {
    const header = request.headers.authorization ?? ''
    const m = /^Bearer\s+(\S+)\s*$/i.exec(header)
    let tenant = m?.[1] ? tenantForKey(config, m[1]) : null
    const token = !header && request.method === 'GET' ? (request.query as { access_token?: string } | undefined)?.access_token : undefined
    const path = EVENTS_PATH.exec(request.url)
    if (token && path?.[1] && path[2]) {
      secret ??= await store.sharedSecret()
      tenant = verifyStreamToken(secret, token, decodeURIComponent(path[1]), decodeURIComponent(path[2]))
    }
    if (!tenant)
      throw new AppError('unauthorized', m ? 'the API key is not valid' : 'send Authorization: Bearer <api key>', { headers: { 'www-authenticate': 'Bearer' } })
    request.tenant = tenant
    request.log = request.log.child({ tenant })
    const { count, resetMs } = await store.countRequest(tenant, Date.now())
    const perMinute = config.tenantLimits.for(tenant).rate_per_min
    if (count > perMinute) {
      throw new AppError('rate_limited', `more than ${perMinute} requests this minute`, { headers: { 'retry-after': String(Math.ceil(resetMs / 1000)) } })
    }
  }
}
