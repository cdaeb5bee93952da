// Removing what a benchmark leaves behind: its containers (by deployment label) and its Redis keys (by
// prefix). Its own file so that benchmarks that run the server as a separate process do not load the app.
import Docker from 'dockerode'
import { Redis } from 'ioredis'
import { LABEL } from '../src/sandbox/labels.js'

/** Removes a benchmark's containers (by deployment label) and its Redis keys (by prefix). */
export async function removeDeployment(deployment: string, keyPrefix: string, redisUrl: string): Promise<void> {
  const docker = new Docker()
  const left = await docker.listContainers({ all: true, filters: { label: [`${LABEL.deployment}=${deployment}`] } })
  // In batches: a density benchmark may leave a thousand, more than dockerd likes at once.
  for (let i = 0; i < left.length; i += 50) {
    await Promise.all(
      left.slice(i, i + 50).map((c) =>
        docker
          .getContainer(c.Id)
          .remove({ force: true })
          .catch(() => undefined),
      ),
    )
  }
  const r = new Redis(redisUrl)
  let cursor = '0'
  do {
    const [next, keys] = await r.scan(cursor, 'MATCH', `${keyPrefix}*`, 'COUNT', 1000)
    cursor = next
    if (keys.length) await r.del(...keys)
  } while (cursor !== '0')
  r.disconnect()
}
