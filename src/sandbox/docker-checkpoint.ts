// A sandbox's memory and files to disk and back, through Docker's checkpoint API (the engine's
// experimental mode; gVisor's runsc does the work). The image is written to a folder the caller
// owns, outside the engine; a restore places a copy in the new container's own checkpoints/ folder
// under the engine's data root, because Docker 20.10 refuses a checkpoint folder on start.
import type Docker from 'dockerode'
import { copyFile, link, mkdir, readdir, rm, writeFile } from 'node:fs/promises'
import { basename, dirname, join } from 'node:path'
import { CheckpointError } from './driver.js'

/** The engine facts a checkpoint depends on, read once. */
export interface CheckpointEngine {
  experimental: boolean
  /** The engine's data root (`docker info` DockerRootDir): a container's folder is containers/<id> in it. */
  rootDir: string
}

export async function checkpointEngine(docker: Docker): Promise<CheckpointEngine> {
  const info = (await docker.info()) as { ExperimentalBuild?: boolean; DockerRootDir?: string }
  return { experimental: info.ExperimentalBuild === true, rootDir: info.DockerRootDir ?? '/var/lib/docker' }
}

/** Why a sandbox of `runtime` cannot be checkpointed on this engine; null when it can. */
export function checkpointRefusal(engine: CheckpointEngine, runtime: string): string | null {
  if (runtime !== 'runsc')
    return `a ${runtime} sandbox cannot be checkpointed here: runc needs CRIU, which fails on this kernel ("Unexpected rt vDSO area bounds"); create the session with runtime "runsc"`
  if (!engine.experimental) return "the Docker engine's experimental mode is off, and Docker's checkpoint API needs it (scripts/setup.sh turns it on)"
  return null
}

/**
 * Writes the running container's checkpoint into `dir` (which must not exist; its parent must) and
 * returns once the container has exited: Docker reports it running for a moment after the call,
 * and a start before the exit fails. Throws CheckpointError; the container keeps running when the
 * checkpoint itself failed.
 */
export async function writeCheckpoint(container: Docker.Container, dir: string, abortSignal: AbortSignal): Promise<void> {
  try {
    // dockerode has the call, its types do not.
    const create = (container as unknown as { createCheckpoint(opts: object): Promise<unknown> }).createCheckpoint.bind(container)
    await create({ _query: {}, _body: { CheckpointID: basename(dir), CheckpointDir: dirname(dir), Exit: true }, abortSignal })
    await container.wait({ condition: 'not-running', abortSignal })
  } catch (err) {
    await rm(dir, { recursive: true, force: true })
    throw new CheckpointError(`the checkpoint failed: ${engineMessage(err)}`, isNoSpace(err), { cause: err })
  }
}

/** Places the checkpoint in `dir` into the (created, not started) container's checkpoints/ folder as `name`. Throws CheckpointError. */
export async function placeCheckpoint(engine: CheckpointEngine, containerId: string, dir: string, name: string): Promise<void> {
  const dest = join(engine.rootDir, 'containers', containerId, 'checkpoints', name)
  try {
    await copyTree(dir, dest)
    // Docker uploads the folder to containerd's content store by its digest: two restores of one
    // image at once would collide ("already exists"), so each copy differs by this file.
    await writeFile(join(dest, 'replcast-restore'), containerId, { mode: 0o600 })
  } catch (err) {
    await rm(dest, { recursive: true, force: true })
    throw new CheckpointError(`the checkpoint could not be given to the engine: ${engineMessage(err)}`, isNoSpace(err), { cause: err })
  }
}

/** Starts a created container from its checkpoint `name` (query only: Docker refuses a body on start). */
export async function startFromCheckpoint(container: Docker.Container, name: string, abortSignal: AbortSignal): Promise<void> {
  try {
    await container.start({ _query: { checkpoint: name }, _body: {}, abortSignal } as object)
  } catch (err) {
    throw new CheckpointError(`the restore failed: ${engineMessage(err)}`, isNoSpace(err), { cause: err })
  }
}

/** Hard links where the engine's data root shares the filesystem (no bytes copied), else copies. */
async function copyTree(from: string, to: string): Promise<void> {
  await mkdir(to, { recursive: true, mode: 0o700 })
  for (const e of await readdir(from, { withFileTypes: true })) {
    const [src, dst] = [join(from, e.name), join(to, e.name)]
    if (e.isDirectory()) await copyTree(src, dst)
    else if (e.isFile()) await link(src, dst).catch((err: NodeJS.ErrnoException) => (err.code === 'EXDEV' ? copyFile(src, dst) : Promise.reject(err)))
  }
}

function engineMessage(err: unknown): string {
  const json = (err as { json?: { message?: string } })?.json
  return json?.message ?? (err instanceof Error ? err.message : String(err))
}

function isNoSpace(err: unknown): boolean {
  return (err as NodeJS.ErrnoException)?.code === 'ENOSPC' || /no space left on device/i.test(engineMessage(err))
}
