// Opaque random ids: a kind prefix and 20 base62 characters (about 119 bits).
import { randomBytes } from 'node:crypto'

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'

export function newId(prefix: 'ses' | 'exe'): string {
  const bytes = randomBytes(20)
  let out = ''
  for (const b of bytes) out += ALPHABET[b % 62]
  return `${prefix}_${out}`
}
