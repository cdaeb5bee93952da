// Runs sandboxes on a Docker engine with dockerode: create with the baseline spec, attach
// before start, demultiplex the attach stream, detach by destroying the socket, watch exits.
import Docker from 'dockerode'
import type { Duplex } from 'node:stream'
import type { Logger } from 'pino'
import { DockerDemuxer } from './demux.js'
import { containerConfig, containerName, type SandboxSpec } from './container-spec.js'
import { LABEL } from './labels.js'
import type { ReplTransport } from '../repl/transport.js'

export interface SandboxExit {
  exitCode: number | null
  oomKilled: boolean
}

export interface SandboxHandle {
  containerId: string
  transport: ReplTransport
  /** Resolves when the container stops (never rejects). */
  exited: Promise<SandboxExit>
}

export interface ManagedContainer {
  id: string
  sessionId: string
}

const STDERR_LOG_LIMIT = 64 * 1024

export class DockerSandboxDriver {
  readonly docker: Docker

  constructor(
    dockerHost: string,
    private readonly log: Logger,
  ) {
    this.docker = new Docker(dockerOptions(dockerHost))
  }

  /** Creates and starts a sandbox; on any failure the container is removed again. Throws the engine's error. */
  async create(spec: SandboxSpec): Promise<SandboxHandle> {
    const container = await this.docker.createContainer(containerConfig(spec))
    try {
      return await this.attachAndStart(container, spec.sessionId)
    } catch (err) {
      await this.remove(container.id)
      throw err
    }
  }

  /** Re-attaches to a running sandbox (after an API restart); output produced meanwhile is not replayed. */
  async adopt(containerId: string, sessionId: string): Promise<SandboxHandle> {
    const container = this.docker.getContainer(containerId)
    const exited = this.watchExit(container, 'not-running')
    const transport = await this.attach(container, sessionId)
    return { containerId, transport, exited }
  }

  /** Stops the REPL process and starts it again in the same container: fresh interpreter, fresh tmpfs. */
  async restart(containerId: string, sessionId: string): Promise<SandboxHandle> {
    const container = this.docker.getContainer(containerId)
    await this.kill(containerId)
    await container.wait({ condition: 'not-running' }).catch(() => undefined)
    return this.attachAndStart(container, sessionId)
  }

  /** The REPL's stdout as kept by the container's log driver since `sinceMs` (frames written while no one was attached). */
  async readStdoutLog(containerId: string, sinceMs: number): Promise<Buffer> {
    const raw = await this.docker
      .getContainer(containerId)
      .logs({ stdout: true, stderr: false, follow: false, since: Math.max(0, Math.floor(sinceMs / 1000) - 1) })
    const parts: Buffer[] = []
    new DockerDemuxer(
      (b) => parts.push(Buffer.from(b)),
      () => undefined,
    ).push(Buffer.isBuffer(raw) ? raw : Buffer.from(String(raw)))
    return Buffer.concat(parts)
  }

  async kill(containerId: string): Promise<void> {
    await ignoreGone(this.docker.getContainer(containerId).kill({ signal: 'SIGKILL' }))
  }

  async remove(containerId: string): Promise<void> {
    await ignoreGone(this.docker.getContainer(containerId).remove({ force: true, v: true }))
  }

  async inspectExit(containerId: string): Promise<SandboxExit & { running: boolean }> {
    try {
      const info = await this.docker.getContainer(containerId).inspect()
      return { running: info.State.Running, exitCode: info.State.ExitCode, oomKilled: info.State.OOMKilled }
    } catch (err) {
      if (statusOf(err) === 404) return { running: false, exitCode: null, oomKilled: false }
      throw err
    }
  }

  async listManaged(deployment: string): Promise<ManagedContainer[]> {
    const list = await this.docker.listContainers({ all: true, filters: { label: [`${LABEL.managed}=true`, `${LABEL.deployment}=${deployment}`] } })
    return list.map((c) => ({ id: c.Id, sessionId: c.Labels[LABEL.session] ?? '' }))
  }

  async runtimes(): Promise<Set<string>> {
    const info = (await this.docker.info()) as { Runtimes?: Record<string, unknown> }
    return new Set(Object.keys(info.Runtimes ?? {}))
  }

  async ping(): Promise<void> {
    await this.docker.ping()
  }

  private async attachAndStart(container: Docker.Container, sessionId: string): Promise<SandboxHandle> {
    const transport = await this.attach(container, sessionId)
    const exited = this.watchExit(container, 'next-exit')
    try {
      await container.start()
    } catch (err) {
      transport.close()
      throw err
    }
    return { containerId: container.id, transport, exited }
  }

  private watchExit(container: Docker.Container, condition: 'next-exit' | 'not-running'): Promise<SandboxExit> {
    return container
      .wait({ condition })
      .then(async (res: { StatusCode?: number }) => {
        const info = await container.inspect().catch(() => null)
        return { exitCode: res.StatusCode ?? null, oomKilled: info?.State.OOMKilled ?? false }
      })
      .catch(() => ({ exitCode: null, oomKilled: false }))
  }

  private async attach(container: Docker.Container, sessionId: string): Promise<ReplTransport> {
    const socket = (await container.attach({ stream: true, stdin: true, stdout: true, stderr: true, hijack: true })) as unknown as Duplex
    return new AttachTransport(socket, this.log.child({ sessionId, containerName: containerName(sessionId) }))
  }
}

class AttachTransport implements ReplTransport {
  private dataCb: (chunk: Buffer) => void = () => {}
  private closeCbs: Array<(err?: Error) => void> = []
  private closed = false
  private stderrLogged = 0

  constructor(
    private readonly socket: Duplex,
    log: Logger,
  ) {
    const demux = new DockerDemuxer(
      (b) => this.dataCb(b),
      (b) => {
        if (this.stderrLogged >= STDERR_LOG_LIMIT) return
        this.stderrLogged += b.length
        log.warn({ stderr: b.toString('utf8').slice(0, 4096) }, 'sandbox stderr')
      },
      (reason) => {
        // The stream lost its framing: nothing after this point can be trusted, so the channel ends.
        log.error({ reason }, 'attach stream is not multiplexed; closing it')
        socket.destroy()
        this.finish(new Error(reason))
      },
    )
    socket.on('data', (chunk: Buffer) => demux.push(chunk))
    socket.on('error', (err) => this.finish(err))
    socket.on('close', () => this.finish())
    socket.on('end', () => this.finish())
  }

  write(data: string): void {
    if (!this.closed) this.socket.write(data)
  }

  onData(cb: (chunk: Buffer) => void): void {
    this.dataCb = cb
  }
  onClose(cb: (err?: Error) => void): void {
    this.closeCbs.push(cb)
  }

  close(): void {
    this.socket.destroy()
    this.finish()
  }

  private finish(err?: Error): void {
    if (this.closed) return
    this.closed = true
    for (const cb of this.closeCbs) cb(err)
  }
}

function dockerOptions(host: string): Docker.DockerOptions {
  if (!host) return { socketPath: '/var/run/docker.sock' }
  if (host.startsWith('unix://')) return { socketPath: host.slice('unix://'.length) }
  const url = new URL(host.replace(/^tcp:/, 'http:'))
  return { host: url.hostname, port: Number(url.port || 2375), protocol: 'http' }
}

function statusOf(err: unknown): number | undefined {
  return (err as { statusCode?: number })?.statusCode
}

/** Stopping or removing what is already gone is success (404 gone, 304 already stopped, 409 being removed). */
async function ignoreGone(p: Promise<unknown>): Promise<void> {
  try {
    await p
  } catch (err) {
    const s = statusOf(err)
    if (s !== 404 && s !== 304 && s !== 409) throw err
  }
}
