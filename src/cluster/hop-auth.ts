// What marks a request one instance passes to another: not a static secret (a leaked header would
// stay good forever) but an HMAC over the method, the path and a timestamp, valid for a short time
// and for that request target only, keyed by a secret that rotates.
//
// The keys live in Redis (a list, newest first, at most KEPT of them), unless REPLCAST_INTERNAL_SECRET
// names them (comma-separated: the first signs, every one verifies; the operator rotates by putting a
// new one first). Every instance reads the list every REFRESH_MS and adds a new key when the newest is
// older than the rotation period; a key signs only once it is ADOPT_MS old, so every instance has read
// it before any hop carries it, and it verifies until two newer ones have replaced it.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import type { Redis } from 'ioredis'

/** How far a hop's timestamp may be from the receiver's clock (either way: the instances' clocks differ a little). */
const HOP_VALIDITY_MS = 30_000
/** How often an instance reads the keys (and rotates them when due). */
export const REFRESH_MS = 5_000
const ADOPT_MS = 3 * REFRESH_MS
const KEPT = 3

// KEYS: the list. ARGV: now, rotation period, a fresh key, how many to keep. Adds the fresh key when
// the newest is due (or none exists) and answers the list.
const ROTATE = `
local head = redis.call('LINDEX', KEYS[1], 0)
local born = head and tonumber(string.match(head, '^(%d+):'))
if not born or born + tonumber(ARGV[2]) <= tonumber(ARGV[1]) then
  redis.call('LPUSH', KEYS[1], ARGV[1] .. ':' .. ARGV[3])
  redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[4]) - 1)
end
return redis.call('LRANGE', KEYS[1], 0, -1)
`

interface Key {
  born: number
  secret: string
}

export interface HopAuthOptions {
  /** REPLCAST_INTERNAL_SECRET: comma-separated keys, or empty for keys kept (and rotated) in Redis. */
  configured: string
  redis: Redis
  /** The Redis list of keys. */
  key: string
  rotateMs: number
  now?: () => number
}

export class HopAuth {
  private keys: Key[]
  private readonly now: () => number

  constructor(private readonly opts: HopAuthOptions) {
    this.now = opts.now ?? Date.now
    this.keys = opts.configured
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)
      .map((secret) => ({ born: 0, secret }))
  }

  /** Reads the keys from Redis, adding a new one when the newest is due. Nothing to do for configured keys. */
  async refresh(): Promise<void> {
    if (this.opts.configured.trim()) return
    const now = this.now()
    const list = (await this.opts.redis.eval(ROTATE, 1, this.opts.key, now, this.opts.rotateMs, randomBytes(32).toString('hex'), KEPT)) as string[]
    this.keys = list.map((entry) => {
      const colon = entry.indexOf(':')
      return { born: Number(entry.slice(0, colon)), secret: entry.slice(colon + 1) }
    })
  }

  /** The header value for a hop of `method path` (path: origin-form, as sent). */
  sign(method: string, path: string): string {
    const now = this.now()
    // The newest key every instance has read by now; the oldest when all are newer (a new deployment).
    const key = this.keys.find((k) => k.born + ADOPT_MS <= now) ?? this.keys.at(-1)
    if (!key) throw new Error('the hop keys have not been read yet')
    return `v1.${now}.${mac(key.secret, method, path, now)}`
  }

  /** Whether `value` was made by an instance of this deployment for `method path` within the validity window. */
  verify(value: unknown, method: string, path: string): boolean {
    if (typeof value !== 'string') return false
    const m = /^v1\.(\d{1,15})\.([A-Za-z0-9_-]{43})$/.exec(value)
    if (!m) return false
    const at = Number(m[1])
    if (Math.abs(this.now() - at) > HOP_VALIDITY_MS) return false
    const got = Buffer.from(m[2]!)
    let ok = false
    // Every key is tried, so timing does not tell which one matched.
    for (const k of this.keys) if (timingSafeEqual(got, Buffer.from(mac(k.secret, method, path, at)))) ok = true
    return ok
  }
}

function mac(secret: string, method: string, path: string, at: number): string {
  return createHmac('sha256', secret).update(`${method}\n${path}\n${at}`).digest('base64url')
}
