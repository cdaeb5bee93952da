// The cluster's channel (an instance that stops names itself there) keeps listening across a Redis
// restart, and an instance closed in the middle of subscribing again (after a reconnect) leaves
// nothing unhandled.
import t, { type Test } from 'tap'
import { connect, createServer, type AddressInfo, type Socket } from 'node:net'
import { Redis } from 'ioredis'
import { pino } from 'pino'
import { ClusterChannel } from '../src/cluster/channel.js'
import { startPrivateRedis } from './helpers/private-redis.js'
import { waitFor } from './helpers/wait.js'

const NAME = 'replcast-test:cluster'

async function setup(tt: Test, url: string) {
  const conn = new Redis(url, { lazyConnect: true })
  const logLines: string[] = []
  const channel = new ClusterChannel(conn, NAME, pino({ level: 'warn' }, { write: (l: string) => void logLines.push(l) }))
  tt.teardown(() => channel.close())
  const publisher = new Redis(url)
  publisher.on('error', () => undefined)
  tt.teardown(() => publisher.disconnect())
  const heard: string[] = []
  await channel.listen((m) => heard.push(m))
  return { conn, channel, publisher, heard, logLines }
}

t.test('after Redis restarts, the channel is subscribed again and hears the next instance that stops', async (t) => {
  const redis = await startPrivateRedis({ persistent: false })
  t.teardown(() => redis.destroy())
  const { publisher, heard } = await setup(t, redis.url)
  t.equal(await publisher.publish(NAME, 'before'), 1)
  t.ok(await waitFor(() => heard.includes('before')))
  await redis.stop()
  await redis.start()
  t.ok(await waitFor(async () => (await publisher.publish(NAME, 'after').catch(() => 0)) === 1), 'it listens again')
  t.ok(await waitFor(() => heard.includes('after')), 'and hears it')
})

t.test('closed while it subscribes again after a reconnect: no unhandled rejection, no warning', async (t) => {
  const redis = await startPrivateRedis({ persistent: false })
  t.teardown(() => redis.destroy())
  const proxy = await startRedisProxy(redis.port)
  t.teardown(() => proxy.close())
  const { conn, channel, logLines } = await setup(t, `redis://127.0.0.1:${proxy.port}`)
  const unhandled: unknown[] = []
  const onUnhandled = (err: unknown) => unhandled.push(err)
  process.on('unhandledRejection', onUnhandled)
  t.teardown(() => process.off('unhandledRejection', onUnhandled))
  // The connection drops; once it has sent SUBSCRIBE again, Redis's answers are held back and it is closed.
  const subscribing = proxy.holdAfterSubscribe()
  proxy.cut()
  await subscribing
  const ended = new Promise((resolve) => conn.once('end', resolve))
  channel.close()
  // The connection has closed: what was waiting for an answer has been rejected.
  await ended
  await new Promise((r) => setImmediate(r))
  t.same(unhandled, [], 'every rejected reply had its handler')
  t.same(
    logLines.filter((l) => l.includes('cluster channel')),
    [],
    'a close is not a failure to subscribe',
  )
})

/**
 * A pass-through to Redis that can drop its connections (a Redis restart, as a client sees it) and,
 * once a client sends SUBSCRIBE, hold back everything Redis answers on that connection.
 */
async function startRedisProxy(redisPort: number) {
  const clients = new Set<Socket>()
  let onSubscribe: (() => void) | null = null
  const server = createServer((client) => {
    clients.add(client)
    const upstream = connect(redisPort, '127.0.0.1')
    let holding = false
    client.on('data', (d: Buffer) => {
      if (onSubscribe && /subscribe/i.test(d.toString('latin1'))) {
        holding = true
        onSubscribe()
        onSubscribe = null
      }
      upstream.write(d)
    })
    upstream.on('data', (d: Buffer) => {
      if (!holding) client.write(d)
    })
    for (const s of [client, upstream]) s.on('error', () => undefined)
    client.on('close', () => {
      clients.delete(client)
      upstream.destroy()
    })
    upstream.on('close', () => client.destroy())
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return {
    port: (server.address() as AddressInfo).port,
    cut: () => {
      for (const c of clients) c.destroy()
    },
    /** Resolves once a client has sent SUBSCRIBE (its answers are held from then on). */
    holdAfterSubscribe: () =>
      new Promise<void>((r) => {
        onSubscribe = r
      }),
    close: () => new Promise<void>((r) => server.close(() => r())),
  }
}
