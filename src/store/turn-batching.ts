// One write per turn of the event loop on a Redis connection: the commands sent during one turn
// (every session's appends, starts and ends whose causes arrived together) leave in one writev when
// the turn's I/O callbacks are done, instead of one write each. A write to a loopback socket is the
// largest single cost of a command on both sides (the kernel hands it to Redis inside the call).
// Order is the connection's, unchanged; a command waits at most for the rest of the turn.
import type { Socket } from 'node:net'
import type { Redis } from 'ioredis'

const BATCHED = Symbol('replcast.turnBatched')

function batch(socket: Socket & { [BATCHED]?: true }): void {
  if (socket[BATCHED]) return
  socket[BATCHED] = true
  const write = socket.write.bind(socket)
  let corked = false
  const flush = () => {
    corked = false
    socket.uncork()
  }
  socket.write = ((...args: Parameters<Socket['write']>): boolean => {
    if (!corked) {
      corked = true
      socket.cork()
      setImmediate(flush)
    }
    return (write as (...a: Parameters<Socket['write']>) => boolean)(...args)
  }) as Socket['write']
}

/** Batches the writes of `redis`'s connection (and of each reconnection) per turn of the event loop. */
export function batchWritesPerTurn(redis: Redis): void {
  const current = () => {
    const s = (redis as unknown as { stream?: Socket }).stream
    if (s) batch(s)
  }
  redis.on('connect', current)
  current()
}
