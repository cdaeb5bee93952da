// The raw Docker baselines of issue 11: a container of the sandbox image with the very flags replcast
// gives a sandbox (src/sandbox/container-spec.ts) but another command (`cat` for an echo, an idle
// python3), driven with dockerode from the benchmark's process: create, attach, start, one line echoed.
import Docker from 'dockerode'
import { randomBytes } from 'node:crypto'
import { PassThrough } from 'node:stream'
import { containerConfig, type SandboxSpec } from '../src/sandbox/container-spec.js'
import { LABEL } from '../src/sandbox/labels.js'

export const IMAGE = process.env.SANDBOX_IMAGE ?? 'replcast-sandbox:latest'
/** The sandbox memory limit every benchmark server gets (bench/server.ts): 50-100 sessions fit the host's share. */
export const SANDBOX_MEMORY_MB = 256
const docker = new Docker()

/** A sandbox's spec with the server's defaults (src/config.ts) but the benchmark's memory limit. */
export function benchSpec(deployment: string, runtime: 'runc' | 'runsc'): SandboxSpec {
  return {
    sessionId: `ses_raw${randomBytes(10).toString('hex').slice(0, 17)}`,
    tenant: 'bench',
    instance: 'bench-raw',
    deployment,
    image: IMAGE,
    runtime,
    user: '1000:1000',
    memoryMb: SANDBOX_MEMORY_MB,
    cpus: 1,
    pids: 128,
    workspaceMb: 256,
    tmpMb: 64,
    nofile: 1024,
    maxStreamBytes: 1_000_000,
    maxImageBytes: 5_000_000,
    env: {},
  }
}

export interface RawContainer {
  container: Docker.Container
  /** Writes a line to the container's stdin and resolves when a line comes back on its stdout. */
  echo(line: string): Promise<void>
  remove(): Promise<void>
}

/**
 * Creates, attaches and starts a container with a sandbox's flags running `cmd`, labelled only with
 * `deployment` (not as a replcast sandbox: no server's reaper or capacity count takes it for one).
 */
export async function startRaw(deployment: string, runtime: 'runc' | 'runsc', cmd: string[]): Promise<RawContainer> {
  const config = containerConfig(benchSpec(deployment, runtime))
  const container = await docker.createContainer({ ...config, Cmd: cmd, Labels: { [LABEL.deployment]: deployment } })
  const sock = (await container.attach({ stream: true, stdin: true, stdout: true, stderr: true, hijack: true })) as unknown as NodeJS.ReadWriteStream & {
    destroy(): void
  }
  const out = new PassThrough()
  docker.modem.demuxStream(sock, out, new PassThrough())
  let waiter: (() => void) | null = null
  let buf = ''
  out.on('data', (b: Buffer) => {
    buf += b.toString()
    if (buf.includes('\n')) {
      buf = ''
      waiter?.()
    }
  })
  await container.start()
  return {
    container,
    echo: (line) =>
      new Promise<void>((resolve) => {
        waiter = resolve
        sock.write(`${line}\n`)
      }),
    async remove() {
      sock.destroy()
      await container.remove({ force: true }).catch(() => undefined)
    },
  }
}

/** Removes every container labelled with `deployment` (what a failed benchmark left). */
export async function removeRaw(deployment: string): Promise<void> {
  const left = await docker.listContainers({ all: true, filters: { label: [`${LABEL.deployment}=${deployment}`] } })
  await Promise.all(
    left.map((c) =>
      docker
        .getContainer(c.Id)
        .remove({ force: true })
        .catch(() => undefined),
    ),
  )
}

/** Whether dockerd has gVisor registered as the runtime "runsc". */
export async function hasRunsc(): Promise<boolean> {
  const info = (await docker.info()) as { Runtimes?: Record<string, unknown> }
  return Boolean(info.Runtimes?.runsc)
}

/**
 * Memory a container uses now as `docker stats` shows it (usage less inactive page cache, cgroup v1
 * or v2), and the cgroup's whole usage; in bytes.
 */
export async function containerMemory(idOrName: string): Promise<{ stats: number; usage: number }> {
  const s = (await docker.getContainer(idOrName).stats({ stream: false })) as unknown as {
    memory_stats: { usage?: number; stats?: Record<string, number> }
  }
  const usage = s.memory_stats.usage ?? NaN
  const st = s.memory_stats.stats ?? {}
  const inactive = st.total_inactive_file ?? st.inactive_file ?? 0
  return { stats: inactive < usage ? usage - inactive : usage, usage }
}
