// DockerDemuxer: Docker's multiplexed attach stream (8-byte header: stream, 0, 0, 0, big-endian
// length) back into stdout and stderr bytes, however the socket chunked it; a stream that is not
// Docker frames is given up on, never buffered without bound and never thrown on.
import t from 'tap'
import { DockerDemuxer, MAX_DOCKER_FRAME } from '../../src/sandbox/demux.js'

/** One Docker attach frame. */
function frame(stream: number, payload: string | Buffer): Buffer {
  const body = typeof payload === 'string' ? Buffer.from(payload) : payload
  const header = Buffer.alloc(8)
  header[0] = stream
  header.writeUInt32BE(body.length, 4)
  return Buffer.concat([header, body])
}

/** A header announcing `size` bytes, with no payload. */
function header(stream: number, size: number): Buffer {
  const h = Buffer.alloc(8)
  h[0] = stream
  h.writeUInt32BE(size, 4)
  return h
}

interface Out {
  readonly stdout: Buffer
  readonly stderr: Buffer
  order: string[]
  corrupt: string[]
  d: DockerDemuxer
}

/** Pushes the chunks through a fresh demuxer; `stdout`/`stderr` read what it emitted so far, `order` the callback order. */
function demux(chunks: Buffer[]): Out {
  const stdout: Buffer[] = []
  const stderr: Buffer[] = []
  const order: string[] = []
  const corrupt: string[] = []
  const d = new DockerDemuxer(
    (b) => {
      stdout.push(Buffer.from(b))
      order.push(`out:${b.toString()}`)
    },
    (b) => {
      stderr.push(Buffer.from(b))
      order.push(`err:${b.toString()}`)
    },
    (reason) => corrupt.push(reason),
  )
  for (const c of chunks) d.push(c)
  return {
    get stdout() {
      return Buffer.concat(stdout)
    },
    get stderr() {
      return Buffer.concat(stderr)
    },
    order,
    corrupt,
    d,
  }
}

const pendingBytes = (d: DockerDemuxer): number => (d as unknown as { pending: Buffer }).pending.length

t.test('frames split at every byte boundary yield the same stdout and stderr bytes, in order', async (t) => {
  const stream = Buffer.concat([
    frame(1, '{"type":"ready"}\n'),
    frame(2, 'warning: something\n'),
    frame(1, 'héllo ✓ 🚀'),
    frame(1, ''),
    frame(2, 'Traceback'),
    frame(1, '\n{"type":"done"}\n'),
  ])
  const whole = demux([stream])
  t.equal(whole.stdout.toString(), '{"type":"ready"}\nhéllo ✓ 🚀\n{"type":"done"}\n')
  t.equal(whole.stderr.toString(), 'warning: something\nTraceback')
  t.same(whole.corrupt, [])

  let bad = 0
  const check = (name: string, chunks: Buffer[]): void => {
    const got = demux(chunks)
    if (!got.stdout.equals(whole.stdout) || !got.stderr.equals(whole.stderr) || got.corrupt.length || pendingBytes(got.d) !== 0) {
      bad++
      t.fail(name, { stdout: got.stdout.toString(), stderr: got.stderr.toString(), corrupt: got.corrupt })
    }
  }
  for (let at = 0; at <= stream.length; at++) check(`cut at byte ${at}`, [stream.subarray(0, at), stream.subarray(at)])
  for (let a = 1; a < stream.length; a += 3)
    for (let b = a + 1; b < stream.length; b += 5) check(`cut at ${a} and ${b}`, [stream.subarray(0, a), stream.subarray(a, b), stream.subarray(b)])
  check(
    'one byte per chunk',
    Array.from(stream, (x) => Buffer.from([x])),
  )
  t.equal(bad, 0, 'every cutting agrees with the whole stream, with nothing left pending')
})

t.test('interleaved stdout and stderr frames are delivered in stream order', async (t) => {
  const frames = Array.from({ length: 20 }, (_, i) => frame(i % 3 === 0 ? 2 : 1, `#${i}`))
  const got = demux([Buffer.concat(frames)])
  t.same(
    got.order,
    Array.from({ length: 20 }, (_, i) => `${i % 3 === 0 ? 'err' : 'out'}:#${i}`),
  )
})

t.test('several frames in one chunk and one frame over many chunks', async (t) => {
  const big = Buffer.alloc(100_000, 0x61)
  const stream = Buffer.concat([frame(1, 'a'), frame(1, 'b'), frame(1, big), frame(2, 'c')])
  const chunks: Buffer[] = []
  for (let i = 0; i < stream.length; i += 4096) chunks.push(stream.subarray(i, i + 4096))
  const got = demux(chunks)
  t.equal(got.stdout.length, 2 + big.length)
  t.ok(got.stdout.subarray(2).equals(big))
  t.equal(got.stderr.toString(), 'c')
})

t.test('zero-length frames deliver nothing harmful and do not stall the stream', async (t) => {
  const got = demux([Buffer.concat([frame(1, ''), frame(2, ''), frame(1, 'x'), frame(1, '')])])
  t.equal(got.stdout.toString(), 'x')
  t.equal(got.stderr.length, 0)
  t.equal(pendingBytes(got.d), 0)
})

t.test('a partial frame kept between chunks survives the caller reusing its chunk buffer', async (t) => {
  const chunk = frame(1, 'stable')
  const seen: Buffer[] = []
  const d = new DockerDemuxer(
    (b) => seen.push(Buffer.from(b)),
    () => {},
  )
  d.push(chunk.subarray(0, 10)) // header + 2 bytes: pending must be a copy
  chunk.fill(0, 0, 10)
  d.push(frame(1, 'stable').subarray(10))
  t.equal(Buffer.concat(seen).toString(), 'stable', 'a partial frame kept across chunks is a copy, not a view of the old chunk')
})

t.test("stream types: 1 is stdout, 2 is stderr, 3 (Docker's own error text) goes to stderr, 0 to stdout", async (t) => {
  const got = demux([Buffer.concat([frame(1, 'out'), frame(2, 'err'), frame(3, 'daemon error'), frame(0, 'stdin echo')])])
  t.equal(got.stdout.toString(), 'outstdin echo')
  t.equal(got.stderr.toString(), 'errdaemon error', 'daemon errors never reach the REPL protocol channel')
  t.same(got.corrupt, [])
})

t.test('an absurd length is refused at once instead of buffering until it arrives', async (t) => {
  const got = demux([frame(1, 'before'), header(1, 0xffffffff), Buffer.alloc(1 << 20, 0x7b)])
  t.equal(got.stdout.toString(), 'before', 'the frames before it were delivered')
  t.equal(got.corrupt.length, 1)
  t.match(got.corrupt[0], /not a Docker stream header: 01000000ffffffff/)
  t.equal(pendingBytes(got.d), 0, 'nothing is buffered')
  for (let i = 0; i < 64; i++) got.d.push(Buffer.alloc(1 << 16, 0x41))
  t.equal(pendingBytes(got.d), 0, 'and nothing is buffered later either')
  t.doesNotThrow(() => got.d.push(frame(1, 'after')))
  t.equal(got.stdout.toString(), 'before', 'nothing after the corrupt header is delivered: the stream cannot be resynchronised')
  t.equal(got.corrupt.length, 1, 'reported once')
})

t.test('the largest accepted frame is MAX_DOCKER_FRAME; one byte more is corrupt', async (t) => {
  t.same(demux([header(1, MAX_DOCKER_FRAME)]).corrupt, [], 'a header for a maximal frame waits for its payload')
  t.equal(demux([header(1, MAX_DOCKER_FRAME + 1)]).corrupt.length, 1)
})

t.test('an unknown stream type means the stream is not multiplexed: reported, dropped, never thrown', async (t) => {
  // What a Tty=true stream or a desynchronised one looks like: JSON text where a header should be.
  const text = Buffer.from('{"v":1,"type":"ready"}\n')
  const got = demux([text])
  t.equal(got.corrupt.length, 1)
  t.equal(got.stdout.length + got.stderr.length, 0, 'no garbage reaches either stream')
  t.equal(pendingBytes(got.d), 0)

  for (const type of [4, 7, 0x80, 0xff]) {
    const r = demux([frame(1, 'ok'), frame(type, 'payload'), frame(1, 'never')])
    t.equal(r.stdout.toString(), 'ok', `stream type ${type}: only what came before`)
    t.equal(r.corrupt.length, 1, `stream type ${type}: reported once`)
  }
})

t.test('a header cut short is kept (at most 7 bytes) until the rest arrives', async (t) => {
  const f = frame(2, 'late')
  const got = demux([f.subarray(0, 7)])
  t.equal(pendingBytes(got.d), 7)
  got.d.push(f.subarray(7))
  t.equal(got.stderr.toString(), 'late')
  t.equal(pendingBytes(got.d), 0)
})

t.test('a demuxer without an onCorrupt callback survives a corrupt stream too', async (t) => {
  const d = new DockerDemuxer(
    () => {},
    () => {},
  )
  t.doesNotThrow(() => {
    d.push(header(9, 1))
    d.push(Buffer.alloc(1000))
  })
  t.equal(pendingBytes(d), 0)
})
