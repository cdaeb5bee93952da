// Splits Docker's multiplexed attach stream (Tty=false) into stdout and stderr bytes.
// Each frame: byte 0 = stream (1 stdout, 2 stderr), bytes 4..7 = big-endian payload length.
// Frames may be split across chunks or several may share one chunk.

export class DockerDemuxer {
  private pending: Buffer = Buffer.alloc(0)

  constructor(private readonly onStdout: (b: Buffer) => void, private readonly onStderr: (b: Buffer) => void) {}

  push(chunk: Buffer): void {
    let buf = this.pending.length ? Buffer.concat([this.pending, chunk]) : chunk
    while (buf.length >= 8) {
      const size = buf.readUInt32BE(4)
      if (buf.length < 8 + size) break
      const payload = buf.subarray(8, 8 + size)
      if (buf[0] === 2) this.onStderr(payload)
      else this.onStdout(payload)
      buf = buf.subarray(8 + size)
    }
    this.pending = buf.length ? Buffer.from(buf) : Buffer.alloc(0)
  }
}
