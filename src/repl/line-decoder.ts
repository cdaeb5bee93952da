// Turns a byte stream into lines, bounded: a line longer than the limit is dropped whole
// (reported once through onOversize) instead of growing memory without end.

export class LineDecoder {
  private parts: Buffer[] = []
  private size = 0
  private skipping = false

  constructor(
    private readonly maxLine: number,
    private readonly onLine: (line: string) => void,
    private readonly onOversize: (bytes: number) => void,
  ) {}

  push(chunk: Buffer): void {
    let start = 0
    for (let nl = chunk.indexOf(10, start); nl !== -1; nl = chunk.indexOf(10, start)) {
      this.append(chunk.subarray(start, nl))
      if (this.skipping) this.onOversize(this.size)
      else this.onLine(Buffer.concat(this.parts, this.size).toString('utf8'))
      this.parts = []
      this.size = 0
      this.skipping = false
      start = nl + 1
    }
    if (start < chunk.length) this.append(chunk.subarray(start))
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
