// A pass-through proxy in front of the real Docker engine's socket that can hold chosen requests
// unanswered, for tests of what the service does when one Docker call hangs (a stuck kill or
// remove). Everything else reaches the engine unchanged, attach streams included.
import { connect, createServer, type Socket } from 'node:net'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

export interface DockerProxy {
  /** DOCKER_HOST for the app under test. */
  host: string
  /** Holds every request whose request line (e.g. `POST /containers/<id>/kill?signal=SIGKILL`) matches, until released. */
  hang(match: RegExp): () => void
  /** How many requests matched a hang rule so far. */
  held(): number
  close(): Promise<void>
}

const REQUEST_LINE = /(?:^|\r\n)(GET|POST|PUT|DELETE|HEAD) (\S+) HTTP\/1\.[01]\r\n/g

export async function startDockerProxy(engineSocket = '/var/run/docker.sock'): Promise<DockerProxy> {
  const dir = mkdtempSync(join(tmpdir(), 'replcast-docker-proxy-'))
  const path = join(dir, 'docker.sock')
  const rules = new Set<RegExp>()
  const sockets = new Set<Socket>()
  let held = 0

  const server = createServer((client) => {
    const engine = connect(engineSocket)
    sockets.add(client).add(engine)
    let holding = false
    client.on('data', (chunk: Buffer) => {
      if (holding) return
      // Requests on a kept-alive connection follow each other; the header block of each arrives whole.
      for (const m of chunk.toString('latin1').matchAll(REQUEST_LINE)) {
        const line = `${m[1]} ${(m[2] ?? '').replace(/^\/v[\d.]+\//, '/')}`
        if ([...rules].some((r) => r.test(line))) {
          holding = true
          held++
          return
        }
      }
      engine.write(chunk)
    })
    engine.pipe(client)
    const end = () => {
      client.destroy()
      engine.destroy()
      sockets.delete(client)
      sockets.delete(engine)
    }
    client.on('close', end).on('error', end)
    engine.on('close', end).on('error', end)
  })
  await new Promise<void>((resolve) => server.listen(path, resolve))

  return {
    host: `unix://${path}`,
    hang(match) {
      rules.add(match)
      return () => rules.delete(match)
    },
    held: () => held,
    async close() {
      for (const s of sockets) s.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
