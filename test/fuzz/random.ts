// Seeded randomness for the contract fuzzer: request i of a run is drawn from its own generator,
// derived from (seed, i), so any one request can be regenerated from the seed and its number.

export interface Rng {
  /** A float in [0, 1). */
  next(): number
  /** An integer in [lo, hi]. */
  int(lo: number, hi: number): number
  /** True with probability p. */
  chance(p: number): boolean
  pick<T>(xs: readonly T[]): T
  /** Picks by weight: [[weight, value], ...]. */
  weighted<T>(xs: ReadonlyArray<readonly [number, T]>): T
  /** A string of `n` characters drawn from `alphabet`. */
  chars(n: number, alphabet: string): string
}

/** sfc32, seeded through splitmix32 from two 32-bit words. */
export function rng(seed: number, stream = 0): Rng {
  let s = (seed ^ Math.imul(stream + 1, 0x9e3779b9)) >>> 0
  const mix = () => {
    s = (s + 0x9e3779b9) >>> 0
    let z = s
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b)
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35)
    return (z ^ (z >>> 16)) >>> 0
  }
  let a = mix()
  let b = mix()
  let c = mix()
  let d = mix()
  const next = () => {
    const t = (((a + b) | 0) + d) | 0
    d = (d + 1) | 0
    a = b ^ (b >>> 9)
    b = (c + (c << 3)) | 0
    c = (c << 21) | (c >>> 11)
    c = (c + t) | 0
    return (t >>> 0) / 4294967296
  }
  for (let i = 0; i < 12; i++) next()
  const r: Rng = {
    next,
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)),
    chance: (p) => next() < p,
    pick: (xs) => xs[Math.floor(next() * xs.length)]!,
    weighted: (xs) => {
      const total = xs.reduce((n, [w]) => n + w, 0)
      let x = next() * total
      for (const [w, v] of xs) {
        x -= w
        if (x < 0) return v
      }
      return xs[xs.length - 1]![1]
    },
    chars: (n, alphabet) => {
      const cs = [...alphabet]
      let out = ''
      for (let i = 0; i < n; i++) out += cs[Math.floor(next() * cs.length)]
      return out
    },
  }
  return r
}
