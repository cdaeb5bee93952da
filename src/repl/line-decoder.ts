// Turns a byte stream into lines, bounded: a line longer than the limit is dropped whole
// (reported once through onOversize) instead of growing memory without end; and, when asked, only
// as much of a chunk as a budget allows (the caller keeps the rest for later: fair-input.ts).

/** What handling one line costs beyond its bytes (parsing it, routing it, its event), counted as bytes. */
export const LINE_COST_BYTES = 256

export class LineDecoder {
  private parts: Buffer[] = []
  private size = 0
  private skipping = false

  constructor(
    private readonly maxLine: number,
    private readonly onLine: (line: string) => void,
    private readonly onOversize: (bytes: number) => void,
  ) {}

  /**
   * Takes the bytes of `chunk` until `budget` is spent (each line costs its bytes and
   * LINE_COST_BYTES): answers how many bytes it took (the rest is the caller's to push again) and
   * what they cost. A line is handled whole once its newline is taken.
   */
  push(chunk: Buffer, budget = Infinity): { taken: number; cost: number } {
    let start = 0
    let cost = 0
    while (start < chunk.length && cost < budget) {
      const nl = chunk.indexOf(10, start)
      // Whole bytes, at least one: every push takes something.
      const room = Math.ceil(budget - cost)
      if (nl === -1 || nl - start >= room) {
        // No newline within what the budget allows: as much of the line as it does.
        const to = Math.min(chunk.length, start + room)
        this.append(chunk.subarray(start, to))
        cost += to - start
        start = to
        break
      }
      this.append(chunk.subarray(start, nl))
      if (this.skipping) this.onOversize(this.size)
      else this.onLine(Buffer.concat(this.parts, this.size).toString('utf8'))
      this.parts = []
      this.size = 0
      this.skipping = false
      cost += nl + 1 - start + LINE_COST_BYTES
      start = nl + 1
    }
    return { taken: start, cost }
  }

  private append(b: Buffer): void {
    this.size += b.length
    if (this.skipping) return
    if (this.size > this.maxLine) {
      this.skipping = true
      this.parts = []
      return
    }
    if (b.length) this.parts.push(Buffer.from(b))
  }
}
