// Runs sandboxes on a Docker engine with dockerode: create with the baseline spec, attach
// before start, demultiplex the attach stream, detach by destroying the socket, watch exits.
import Docker from 'dockerode'
import type { Duplex } from 'node:stream'
import type { Logger } from 'pino'
import type { ReplTransport } from '../repl/transport.js'
import { AttachTransport } from './attach-transport.js'
import { DockerDemuxer } from './demux.js'
import { containerConfig, containerName, type SandboxSpec } from './container-spec.js'
import { LABEL } from './labels.js'
import type { ImageFacts, ManagedContainer, RestoredSandbox, SandboxDriver, SandboxExit, SandboxFiles, SandboxHandle, Terminal } from './driver.js'
import { HostMemory } from './host-memory.js'
import { WorkspaceFiles } from './workspace-files.js'
import { openTerminal, type TerminalSize } from './sandbox-terminal.js'
import { TimeoutError, withTimeout } from '../retry.js'
import { checkpointEngine, checkpointRefusal, placeCheckpoint, startFromCheckpoint, writeCheckpoint, type CheckpointEngine } from './docker-checkpoint.js'

export type { ImageFacts, ManagedContainer, SandboxExit, SandboxHandle } from './driver.js'

/** The name a restored container's checkpoint has in its own checkpoints/ folder. */
const CHECKPOINT_NAME = 'replcast'
/** How long a SIGKILLed sandbox is watched for the engine's OOM flag: OOM_RECHECKS × OOM_RECHECK_MS. */
const OOM_RECHECKS = 2
const OOM_RECHECK_MS = 100

export class DockerSandboxDriver implements SandboxDriver {
  readonly docker: Docker
  readonly memory: HostMemory
  private engine: Promise<string> | null = null
  private checkpoints: Promise<CheckpointEngine> | null = null

  /** `timeoutMs` bounds every engine call but the ones that wait on purpose (a container's exit). */
  constructor(
    dockerHost: string,
    private readonly log: Logger,
    private readonly timeoutMs = 30000,
  ) {
    this.docker = new Docker(dockerOptions(dockerHost))
    this.memory = new HostMemory(this.docker, timeoutMs)
  }

  /** The engine's id from `docker info`, read once (asked again after a failure). */
  engineId(): Promise<string> {
    this.engine ??= this.call('info', withSignal(this.docker.info.bind(this.docker))).then(
      (info) => {
        const id = (info as { ID?: string }).ID
        if (!id) throw new Error('the Docker engine reports no ID')
        return id
      },
      (err: unknown) => {
        this.engine = null
        throw err
      },
    )
    return this.engine
  }

  workspaceFiles(user: string, stallMs: number): SandboxFiles {
    return new WorkspaceFiles({ docker: this.docker, user, timeoutMs: this.timeoutMs, stallMs, log: this.log })
  }

  openTerminal(containerId: string, user: string, size: TerminalSize): Promise<Terminal> {
    return openTerminal(this.docker, containerId, { ...size, user, timeoutMs: this.timeoutMs, log: this.log })
  }

  /** Creates and starts a sandbox; on any failure the container is removed again. Throws the engine's error, or TimeoutError. */
  async create(spec: SandboxSpec): Promise<SandboxHandle> {
    const container = await this.createContainer(spec)
    try {
      return await this.attachAndStart(container, spec.sessionId)
    } catch (err) {
      await this.remove(container.id)
      throw err
    }
  }

  async checkpointRefusal(runtime: string): Promise<string | null> {
    return checkpointRefusal(await this.checkpointFacts(), runtime)
  }

  /** Throws CheckpointError (the sandbox keeps running), or TimeoutError. */
  async checkpoint(containerId: string, dir: string): Promise<void> {
    await this.call('checkpoint', (abortSignal) => writeCheckpoint(this.docker.getContainer(containerId), dir, abortSignal))
  }

  async runningExecs(containerId: string): Promise<number> {
    const info = await this.call('inspect', (abortSignal) => this.docker.getContainer(containerId).inspect({ abortSignal }))
    const execs = await Promise.all(
      (info.ExecIDs ?? []).map((id) =>
        this.call('exec inspect', () => this.docker.getExec(id).inspect()).then(
          (e) => e.Running,
          // Gone meanwhile: it runs no more.
          () => false,
        ),
      ),
    )
    return execs.filter(Boolean).length
  }

  /** Throws CheckpointError, the engine's error or TimeoutError; on any failure the new container is removed again. */
  async restore(spec: SandboxSpec, dir: string): Promise<RestoredSandbox> {
    const facts = await this.checkpointFacts()
    // A container left under the session's name (a restore cut short by a crash) is in the way.
    await this.remove(containerName(spec.sessionId))
    const t0 = performance.now()
    const container = await this.createContainer(spec)
    const created = performance.now()
    try {
      await placeCheckpoint(facts, container.id, dir, CHECKPOINT_NAME)
      const placed = performance.now()
      const handle = await this.attachAndStart(container, spec.sessionId, CHECKPOINT_NAME)
      return { ...handle, phasesMs: { create: created - t0, place: placed - created, start: performance.now() - placed } }
    } catch (err) {
      await this.remove(container.id)
      throw err
    }
  }

  private checkpointFacts(): Promise<CheckpointEngine> {
    this.checkpoints ??= this.call('info', () => checkpointEngine(this.docker)).catch((err: unknown) => {
      this.checkpoints = null
      throw err
    })
    return this.checkpoints
  }

  private async createContainer(spec: SandboxSpec): Promise<Docker.Container> {
    try {
      return await this.call(
        'create',
        (abortSignal) => this.docker.createContainer({ ...containerConfig(spec), abortSignal }),
        (late) => void this.remove(late.id).catch(() => undefined),
      )
    } catch (err) {
      // The engine may have created it after all: remove it by its name.
      if (err instanceof TimeoutError) await this.remove(containerName(spec.sessionId)).catch(() => undefined)
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
    await this.call('wait', (abortSignal) => container.wait({ condition: 'not-running', abortSignal })).catch(() => undefined)
    return this.attachAndStart(container, sessionId)
  }

  /** The REPL's stdout as kept by the container's log driver since `sinceMs` (frames written while no one was attached). */
  async readStdoutLog(containerId: string, sinceMs: number): Promise<Buffer> {
    const since = Math.max(0, Math.floor(sinceMs / 1000) - 1)
    const raw = await this.call('logs', (abortSignal) =>
      this.docker.getContainer(containerId).logs({ stdout: true, stderr: false, follow: false, since, abortSignal }),
    )
    const parts: Buffer[] = []
    new DockerDemuxer(
      (b) => parts.push(Buffer.from(b)),
      () => undefined,
    ).push(Buffer.isBuffer(raw) ? raw : Buffer.from(String(raw)))
    return Buffer.concat(parts)
  }

  async kill(containerId: string): Promise<void> {
    await ignoreGone(this.call('kill', (abortSignal) => this.docker.getContainer(containerId).kill({ signal: 'SIGKILL', abortSignal })))
  }

  async remove(containerId: string): Promise<void> {
    await ignoreGone(this.call('remove', (abortSignal) => this.docker.getContainer(containerId).remove({ force: true, v: true, abortSignal })))
  }

  async nameAfterSession(containerId: string, sessionId: string): Promise<void> {
    const name = containerName(sessionId)
    await ignoreGone(this.call('rename', (abortSignal) => this.docker.getContainer(containerId).rename({ name, abortSignal })))
  }

  async inspectExit(containerId: string): Promise<SandboxExit & { running: boolean }> {
    try {
      const state = await this.settledState(this.docker.getContainer(containerId))
      return { running: state.Running, exitCode: state.ExitCode, oomKilled: state.OOMKilled }
    } catch (err) {
      if (statusOf(err) === 404) return { running: false, exitCode: null, oomKilled: false }
      throw err
    }
  }

  /**
   * The container's state once Docker has said why it stopped. The engine records an OOM kill from
   * its own event, apart from the exit: under load a container killed by SIGKILL (137) can show as
   * exited before it shows `OOMKilled`, so such an exit is read again for a moment.
   */
  private async settledState(container: Docker.Container): Promise<Docker.ContainerInspectInfo['State']> {
    const inspect = async () => (await this.call('inspect', (abortSignal) => container.inspect({ abortSignal }))).State
    let state = await inspect()
    for (let i = 0; i < OOM_RECHECKS && !state.Running && state.ExitCode === 137 && !state.OOMKilled; i++) {
      await new Promise((resolve) => setTimeout(resolve, OOM_RECHECK_MS))
      state = await inspect()
    }
    return state
  }

  async listManaged(deployment: string): Promise<ManagedContainer[]> {
    const filters = { label: [`${LABEL.managed}=true`, `${LABEL.deployment}=${deployment}`] }
    const list = await this.call('list', (abortSignal) => this.docker.listContainers({ all: true, filters, abortSignal }))
    return list.map((c) => ({
      id: c.Id,
      sessionId: c.Labels[LABEL.session] ?? '',
      name: (c.Names[0] ?? '').replace(/^\//, ''),
      instance: c.Labels[LABEL.instance] ?? '',
      pooled: c.Labels[LABEL.pool] === 'true',
      state: c.State,
    }))
  }

  /** The image's entrypoint and command, and its labels; null when the engine does not have it. */
  async imageFacts(image: string): Promise<ImageFacts | null> {
    try {
      // Image inspect takes no abort signal (its options become the query string); the timeout still bounds the wait.
      const info = await this.call('image inspect', () => this.docker.getImage(image).inspect())
      const cfg = (info.Config ?? {}) as { Entrypoint?: string[] | string | null; Cmd?: string[] | string | null; Labels?: Record<string, string> | null }
      const parts = (v: string[] | string | null | undefined) => (Array.isArray(v) ? v : v ? [v] : [])
      return { command: [...parts(cfg.Entrypoint), ...parts(cfg.Cmd)], labels: cfg.Labels ?? {} }
    } catch (err) {
      if (statusOf(err) === 404) return null
      throw err
    }
  }

  async runtimes(): Promise<Set<string>> {
    const info = (await this.call('info', withSignal(this.docker.info.bind(this.docker)))) as { Runtimes?: Record<string, unknown> }
    return new Set(Object.keys(info.Runtimes ?? {}))
  }

  async ping(): Promise<void> {
    await this.call('ping', withSignal(this.docker.ping.bind(this.docker)))
  }

  /**
   * One engine call bounded by the timeout: its request is aborted then (so no socket lingers), and
   * the caller gets a TimeoutError even if the client library never settles the aborted call.
   * `late` disposes of a result that arrives after the caller was told of the timeout.
   */
  private async call<T>(what: string, fn: (abortSignal: AbortSignal) => Promise<T>, late?: (value: T) => void): Promise<T> {
    const ac = new AbortController()
    const timer = setTimeout(() => ac.abort(), this.timeoutMs)
    const work = fn(ac.signal)
    try {
      return await withTimeout(work, this.timeoutMs + 100, `docker ${what}`)
    } catch (err) {
      if (late) work.then(late, () => undefined)
      if (ac.signal.aborted) throw new TimeoutError(`docker ${what} did not answer within ${this.timeoutMs} ms`, { cause: err })
      throw err
    } finally {
      clearTimeout(timer)
    }
  }

  /** Attaches, then starts the container (from its checkpoint `checkpoint` when given). */
  private async attachAndStart(container: Docker.Container, sessionId: string, checkpoint?: string): Promise<SandboxHandle> {
    const transport = await this.attach(container, sessionId)
    const exited = this.watchExit(container, 'next-exit')
    try {
      if (checkpoint) await this.call('start', (abortSignal) => startFromCheckpoint(container, checkpoint, abortSignal))
      else await this.call('start', (abortSignal) => container.start({ abortSignal }))
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
        const state = await this.settledState(container).catch(() => null)
        return { exitCode: res.StatusCode ?? null, oomKilled: state?.OOMKilled ?? false }
      })
      .catch(() => ({ exitCode: null, oomKilled: false }))
  }

  private async attach(container: Docker.Container, sessionId: string): Promise<ReplTransport> {
    // The timeout covers the upgrade only: once attached, the stream lives as long as the session.
    const socket = (await this.call(
      'attach',
      (abortSignal) => container.attach({ stream: true, stdin: true, stdout: true, stderr: true, hijack: true, abortSignal }),
      (late) => (late as unknown as Duplex).destroy(),
    )) as unknown as Duplex
    return new AttachTransport(socket, this.log.child({ sessionId, containerName: containerName(sessionId) }))
  }
}

function dockerOptions(host: string): Docker.DockerOptions {
  if (!host) return { socketPath: '/var/run/docker.sock' }
  if (host.startsWith('unix://')) return { socketPath: host.slice('unix://'.length) }
  const url = new URL(host.replace(/^tcp:/, 'http:'))
  return { host: url.hostname, port: Number(url.port || 2375), protocol: 'http' }
}

/** dockerode's info and ping take { abortSignal } too, though its types do not say so. */
function withSignal(fn: () => Promise<unknown>): (abortSignal: AbortSignal) => Promise<unknown> {
  return (abortSignal) => (fn as unknown as (opts: { abortSignal: AbortSignal }) => Promise<unknown>)({ abortSignal })
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
