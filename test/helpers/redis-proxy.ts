// A TCP proxy in front of Redis that holds back an API process's writes from a chosen one on, to
// catch the process in the instant between a write and its answer.
import { createServer, connect, type Socket } from 'node:net'
import { freePort } from './server-process.js'

/**
 * Once `holdWhen` is set, the first chunk an API process sends that contains all of it is held, and
 * so is everything after it on every connection: none of it reaches Redis (`started` resolves then;
 * `held()` lists those chunks in order). `cut()` drops them and cuts the connections that sent them;
 * `pass()` sends them on, in order, as if they had only been slow. Either way new writes pass again.
 * `down()` drops them too and cuts every connection, and Redis cannot be reached until `up()`.
 */
export async function redisProxy(redisUrl: string) {
  const target = redisUrl.startsWith('/') ? { path: redisUrl } : { host: new URL(redisUrl).hostname, port: Number(new URL(redisUrl).port || 6379) }
  let startHolding = () => {}
  const started = new Promise<void>((resolve) => (startHolding = resolve))
  let holding = false
  const held: Array<{ client: Socket; redis: Socket; chunk: Buffer }> = []
  const open = new Set<Socket>()
  const server = createServer((client) => {
    open.add(client)
    client.once('close', () => open.delete(client))
    const redis = connect(target)
    client.on('data', (chunk: Buffer) => {
      if (!holding && p.holdWhen.length && p.holdWhen.every((b) => chunk.includes(b))) {
        holding = true
        startHolding()
      }
      if (holding) held.push({ client, redis, chunk })
      else redis.write(chunk)
    })
    redis.on('data', (chunk: Buffer) => client.write(chunk))
    const end = () => {
      client.destroy()
      redis.destroy()
    }
    client.on('error', end).on('close', end)
    redis.on('error', end).on('close', end)
  })
  const port = await freePort()
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve))
  const stopHolding = () => {
    held.length = 0
    holding = false
    p.holdWhen = []
  }
  const p = {
    holdWhen: [] as Buffer[],
    url: `redis://127.0.0.1:${port}`,
    started,
    held: () => held.map((h) => h.chunk),
    cut() {
      for (const h of held) h.client.destroy()
      stopHolding()
    },
    pass() {
      for (const h of held) h.redis.write(h.chunk)
      stopHolding()
    },
    /** Stops listening (a connection is refused, as by a Redis that is not running) and cuts every connection. */
    down() {
      server.close()
      for (const c of open) c.destroy()
      stopHolding()
    },
    up: () => new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve)),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }
  return p
}
