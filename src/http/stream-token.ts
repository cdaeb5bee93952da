// Short-lived tokens for browsers' EventSource and WebSocket, which cannot send an Authorization
// header: an HMAC over (tenant, session, what it opens, expiry), valid for one execution's events, or
// for the session's terminal, only.
import { createHmac, timingSafeEqual } from 'node:crypto'

export const STREAM_TOKEN_TTL_S = 300
/** What a terminal token names instead of an execution id (which always starts `exe_`): an events token never opens a terminal, nor the reverse. */
export const PTY_TOKEN_SCOPE = 'pty'

interface Claims {
  tenant: string
  sid: string
  /** The execution whose events it reads, or PTY_TOKEN_SCOPE. */
  eid: string
  exp: number
}

/**
 * The one way to the HMAC secret, for minting and for verifying alike: read from Redis each time
 * (created there on first use, shared by every instance), never cached, so a secret that changed
 * in Redis (rotated, or lost with Redis's data) changes everywhere at once.
 */
export function streamTokenSecret(store: { sharedSecret(): Promise<string> }): () => Promise<string> {
  return () => store.sharedSecret()
}

export function mintStreamToken(secret: string, claims: Claims): string {
  const body = Buffer.from(JSON.stringify(claims)).toString('base64url')
  return `${body}.${sign(secret, body)}`
}

/** The token's tenant when it is genuine, unexpired and for this session and execution; else null. */
export function verifyStreamToken(secret: string, token: string, sid: string, eid: string, nowMs = Date.now()): string | null {
  const [body, sig] = token.split('.')
  if (!body || !sig) return null
  const want = Buffer.from(sign(secret, body))
  const got = Buffer.from(sig)
  if (want.length !== got.length || !timingSafeEqual(want, got)) return null
  let c: Claims
  try {
    c = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as Claims
  } catch {
    return null
  }
  if (c.sid !== sid || c.eid !== eid || typeof c.exp !== 'number' || c.exp * 1000 < nowMs) return null
  return c.tenant
}

function sign(secret: string, body: string): string {
  return createHmac('sha256', secret).update(body).digest('base64url')
}
