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
  /** Holds every request whose request line (e.g. `POST /containers/<id>/kill?signal=SIGKILL`) matches; the returned release sends them on to the engine (those whose caller has not given up) and stops holding. */
  hang(match: RegExp): () => void
  /** How many requests matched a hang rule so far. */
  held(): number
  close(): Promise<void>
}

const REQUEST_LINE = /(?:^|\r\n)(GET|POST|PUT|DELETE|HEAD) (\S+) HTTP\/1\.[01]\r\n/g

export async function startDockerProxy(engineSocket = '/var/run/docker.sock'): Promise<DockerProxy> {
  const dir = mkdtempSync(join(tmpdir(), 'replcast-docker-proxy-'))
  const path = join(dir, 'docker.sock')
  /** Each hang rule, with how to let go of each request it holds. */
  const rules = new Map<RegExp, Set<() => void>>()
  const sockets = new Set<Socket>()
  let heldCount = 0

  const server = createServer((client) => {
    const engine = connect(engineSocket)
    sockets.add(client).add(engine)
    /** What this connection sent from a held request on, forwarded when its rule is released. */
    let holding: Buffer[] | null = null
    client.on('data', (chunk: Buffer) => {
      if (holding) return void holding.push(chunk)
      // Requests on a kept-alive connection follow each other; the header block of each arrives whole.
      for (const m of chunk.toString('latin1').matchAll(REQUEST_LINE)) {
        const line = `${m[1]} ${(m[2] ?? '').replace(/^\/v[\d.]+\//, '/')}`
        const rule = [...rules.keys()].find((r) => r.test(line))
        if (rule) {
          const held = (holding = [chunk])
          heldCount++
          rules.get(rule)?.add(() => {
            holding = null
            for (const c of held) if (!engine.destroyed) engine.write(c)
          })
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
      const forwards = new Set<() => void>()
      rules.set(match, forwards)
      return () => {
        rules.delete(match)
        for (const forward of forwards) forward()
      }
    },
    held: () => heldCount,
    async close() {
      for (const s of sockets) s.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
