// Splits Docker's multiplexed attach stream (Tty=false) into stdout and stderr bytes.
// Each frame: byte 0 = stream (1 stdout, 2 stderr), bytes 4..7 = big-endian payload length.
// Frames may be split across chunks or several may share one chunk.
// A header with an unknown stream type or an absurd length means the bytes are not (or no
// longer) Docker frames; that cannot be resynchronised, so the rest of the stream is dropped
// (onCorrupt is told once) rather than buffered without bound waiting for a frame that never ends.

/** Docker copies container output in 32 KiB reads; a frame announcing more than this is not Docker's. */
export const MAX_DOCKER_FRAME = 16 * 1024 * 1024

export class DockerDemuxer {
  private pending: Buffer = Buffer.alloc(0)
  private corrupt = false

  constructor(
    private readonly onStdout: (b: Buffer) => void,
    private readonly onStderr: (b: Buffer) => void,
    private readonly onCorrupt: (reason: string) => void = () => {},
  ) {}

  push(chunk: Buffer): void {
    if (this.corrupt) return
    let buf = this.pending.length ? Buffer.concat([this.pending, chunk]) : chunk
    while (buf.length >= 8) {
      const stream = buf[0]!
      const size = buf.readUInt32BE(4)
      if (stream > 3 || size > MAX_DOCKER_FRAME) {
        this.corrupt = true
        this.pending = Buffer.alloc(0)
        this.onCorrupt(`not a Docker stream header: ${buf.subarray(0, 8).toString('hex')}`)
        return
      }
      if (buf.length < 8 + size) break
      const payload = buf.subarray(8, 8 + size)
      // 0 = stdin (never sent on attach; Docker's own reader treats it as stdout), 3 = Docker's own error text.
      if (stream === 2 || stream === 3) this.onStderr(payload)
      else this.onStdout(payload)
      buf = buf.subarray(8 + size)
    }
    this.pending = buf.length ? Buffer.from(buf) : Buffer.alloc(0)
  }
}
