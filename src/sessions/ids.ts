// Opaque random ids: a kind prefix (ses, exe, prc: a background process, snp: a snapshot) and 20 base62 characters (about 119 bits).
import { randomFillSync } from 'node:crypto'

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'
const ID_BYTES = 20
/** Random bytes drawn from the system's generator a few hundred ids at a time, each byte used once. */
const pool = Buffer.alloc(ID_BYTES * 256)
let used = pool.length

export function newId(prefix: 'ses' | 'exe' | 'prc' | 'snp'): string {
  if (used + ID_BYTES > pool.length) {
    randomFillSync(pool)
    used = 0
  }
  let out = ''
  for (let i = used; i < used + ID_BYTES; i++) out += ALPHABET[pool[i]! % 62]
  used += ID_BYTES
  return `${prefix}_${out}`
}
