// What the Docker engine's memory is promised to: the host's total, and the memory limits of the
// replcast sandboxes it runs, whatever their deployment or API instance, counted from the engine
// itself so that several API instances on one engine see the same sum.
import type Docker from 'dockerode'
import { LABEL } from './labels.js'

/** States in which a container holds (or is about to hold) its memory. */
const LIVE_STATES = new Set(['created', 'running', 'restarting', 'paused'])

export class HostMemory {
  private total: Promise<number> | null = null
  /** Limits of containers created without the memory label (before it existed), by container id. */
  private readonly inspected = new Map<string, number>()

  constructor(
    private readonly docker: Docker,
    private readonly timeoutMs: number,
  ) {}

  /** The host's memory in bytes (Docker `info().MemTotal`), read once and kept. */
  totalBytes(): Promise<number> {
    // dockerode's info() takes an abort signal, though its types do not say so.
    const docker = this.docker as unknown as { info(opts: { abortSignal: AbortSignal }): Promise<{ MemTotal?: number }> }
    this.total ??= docker.info({ abortSignal: AbortSignal.timeout(this.timeoutMs) }).then(
      (info) => {
        if (!info.MemTotal || info.MemTotal <= 0) throw new Error('the Docker engine reports no MemTotal')
        return info.MemTotal
      },
      (err: unknown) => {
        this.total = null // asked again next time
        throw err
      },
    )
    return this.total
  }

  /** The memory limit in bytes of each live replcast sandbox on the engine, by session id. */
  async sandboxLimits(): Promise<Map<string, number>> {
    const list = await this.docker.listContainers({
      all: true,
      filters: { label: [`${LABEL.managed}=true`] },
      abortSignal: AbortSignal.timeout(this.timeoutMs),
    })
    const live = list.filter((c) => LIVE_STATES.has(c.State))
    const out = new Map<string, number>()
    for (const c of live) out.set(c.Labels[LABEL.session] || c.Id, await this.limitOf(c))
    for (const id of this.inspected.keys()) if (!live.some((c) => c.Id === id)) this.inspected.delete(id)
    return out
  }

  private async limitOf(c: Docker.ContainerInfo): Promise<number> {
    const labelled = Number(c.Labels[LABEL.memory])
    if (Number.isSafeInteger(labelled) && labelled > 0) return labelled
    let bytes = this.inspected.get(c.Id)
    if (bytes === undefined) {
      const info = await this.docker
        .getContainer(c.Id)
        .inspect({ abortSignal: AbortSignal.timeout(this.timeoutMs) })
        .catch(() => null)
      // A container without a limit (or gone meanwhile) is counted as none.
      bytes = info?.HostConfig.Memory ?? 0
      if (info) this.inspected.set(c.Id, bytes)
    }
    return bytes
  }
}
