// The attach stream of a sandbox: stdout that arrives before the REPL client listens (a quick REPL's
// `ready` on a loaded host) is handed over when it starts listening, not lost.
import { PassThrough } from 'node:stream'
import { pino } from 'pino'
import t from 'tap'
import { AttachTransport } from '../../src/sandbox/attach-transport.js'

/** One frame of Docker's multiplexed attach stream. */
const frame = (stream: 1 | 2, text: string): Buffer => {
  const body = Buffer.from(text)
  const head = Buffer.alloc(8)
  head[0] = stream
  head.writeUInt32BE(body.length, 4)
  return Buffer.concat([head, body])
}

t.test('stdout written before onData reaches the listener, in order, then live output follows', async (t) => {
  const socket = new PassThrough()
  const transport = new AttachTransport(socket, pino({ level: 'silent' }))
  socket.write(frame(1, '{"type":"ready"}\n'))
  socket.write(frame(2, 'noise on stderr'))
  socket.write(frame(1, '{"type":"second"}\n'))
  await new Promise((resolve) => setImmediate(resolve))
  const got: string[] = []
  transport.onData((b) => got.push(b.toString()))
  t.same(got, ['{"type":"ready"}\n', '{"type":"second"}\n'], 'what came early is delivered at once')
  socket.write(frame(1, '{"type":"live"}\n'))
  await new Promise((resolve) => setImmediate(resolve))
  t.same(got.at(-1), '{"type":"live"}\n', 'and what comes later is delivered as it arrives')
  transport.close()
})

t.test('what comes early is bounded: past 1 MiB it is dropped instead of held', async (t) => {
  const socket = new PassThrough()
  const transport = new AttachTransport(socket, pino({ level: 'silent' }))
  const chunk = 'x'.repeat(64 * 1024)
  for (let i = 0; i < 40; i++) socket.write(frame(1, chunk))
  await new Promise((resolve) => setImmediate(resolve))
  let bytes = 0
  transport.onData((b) => (bytes += b.length))
  t.ok(bytes <= 1 << 20, `held ${bytes} bytes (at most 1 MiB)`)
  t.ok(bytes > 0, 'and delivered what it held')
  transport.close()
})
