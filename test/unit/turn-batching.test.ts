// batchWritesPerTurn (src/store/turn-batching.ts) on real loopback sockets: what is written to the
// connection during one turn of the event loop leaves in one writev, in order, once the turn's I/O is
// done; the next turn's writes leave on their own, and a new connection (a reconnect) is batched too.
import { EventEmitter, once } from 'node:events'
import net from 'node:net'
import t, { type Test } from 'tap'
import type { Redis } from 'ioredis'
import { batchWritesPerTurn } from '../../src/store/turn-batching.js'

interface Counted {
  socket: net.Socket
  /** Each system-level write the socket made: the chunks it carried. */
  writes: string[][]
  /** Resolves once the other side has read `text` in all. */
  until: (text: string) => Promise<string>
}

/** A connected pair on loopback; the client side counts its writes. */
async function connection(t: Test): Promise<Counted> {
  let received = ''
  const arrived = new EventEmitter()
  const server = net.createServer((s) =>
    s.on('data', (b: Buffer) => {
      received += b.toString()
      arrived.emit('data')
    }),
  )
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const socket = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1')
  await once(socket, 'connect')
  t.teardown(() => {
    socket.destroy()
    server.close()
  })
  const writes: string[][] = []
  const inner = socket as unknown as {
    _write: (c: Buffer, e: BufferEncoding, cb: () => void) => void
    _writev: (cs: Array<{ chunk: Buffer | string }>, cb: () => void) => void
  }
  const write = inner._write.bind(socket)
  const writev = inner._writev.bind(socket)
  inner._write = (c, e, cb) => {
    writes.push([String(c)])
    write(c, e, cb)
  }
  inner._writev = (cs, cb) => {
    writes.push(cs.map((c) => String(c.chunk)))
    writev(cs, cb)
  }
  const until = async (text: string) => {
    while (received.length < text.length) await once(arrived, 'data')
    return received
  }
  return { socket, writes, until }
}

/** What batchWritesPerTurn needs of an ioredis connection: its socket, and its `connect` event. */
function fakeRedis(stream: net.Socket): Redis & EventEmitter {
  return Object.assign(new EventEmitter(), { stream }) as unknown as Redis & EventEmitter
}

const nextTurn = () => new Promise((r) => setImmediate(r))

t.test('the writes of one turn leave together, in order, after the turn', async (t) => {
  const c = await connection(t)
  batchWritesPerTurn(fakeRedis(c.socket))
  c.socket.write('a')
  c.socket.write('b')
  await Promise.resolve()
  c.socket.write('c')
  t.same(c.writes, [], 'nothing is written during the turn')
  await nextTurn()
  t.same(c.writes, [['a', 'b', 'c']], 'one writev with the three, in order')
  c.socket.write('d')
  await nextTurn()
  t.same(c.writes, [['a', 'b', 'c'], ['d']], "the next turn's write is not held for a later one")
  t.equal(await c.until('abcd'), 'abcd', 'the other side reads them in order')
})

t.test('a reconnection is batched too, and batching twice changes nothing', async (t) => {
  const first = await connection(t)
  const redis = fakeRedis(first.socket)
  batchWritesPerTurn(redis)
  const second = await connection(t)
  ;(redis as unknown as { stream: net.Socket }).stream = second.socket
  redis.emit('connect')
  redis.emit('connect')
  second.socket.write('x')
  second.socket.write('y')
  t.same(second.writes, [])
  await nextTurn()
  t.same(second.writes, [['x', 'y']])
})
