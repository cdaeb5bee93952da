// Hibernated sessions' checkpoints on disk: one folder per session under CHECKPOINT_DIR, owner-only
// (they hold a tenant's memory), written under a temporary name and renamed once complete, so a
// folder with a session's plain name is always a whole checkpoint. A sha256 over the files (names
// and contents, in a stable order), kept in Redis with the session, is checked before each restore.
import { createHash, randomBytes } from 'node:crypto'
import { createReadStream } from 'node:fs'
import { chmod, copyFile, link, lstat, mkdir, readdir, rename, rm, stat, statfs } from 'node:fs/promises'
import { join, resolve } from 'node:path'

/** A folder younger than this is never swept: a hibernation may be about to name it in Redis. */
const SWEEP_GRACE_MS = 10 * 60 * 1000
/** Session ids are safe file names (ids.ts); anything else in a path is refused. */
const SAFE_NAME = /^[A-Za-z0-9_-]{1,64}$/

/** Snapshots' folders (and forks' copies, which are named like them) share the root with sessions'. */
export const SNAPSHOT_PREFIX = 'snp_'

/** The checkpoint does not match the checksum recorded with its session (changed, truncated, or missing). */
export class CheckpointMismatch extends Error {
  override name = 'CheckpointMismatch'
}

export interface SealedCheckpoint {
  digest: string
  bytes: number
}

export class CheckpointStore {
  readonly root: string

  constructor(root: string) {
    this.root = resolve(root)
  }

  /** A new folder name for a checkpoint being written (it does not exist yet; its parent does). */
  async partDir(sid: string): Promise<string> {
    await mkdir(this.root, { recursive: true, mode: 0o700 })
    await chmod(this.root, 0o700)
    return join(this.root, `${safe(sid)}.part-${randomBytes(4).toString('hex')}`)
  }

  /** Bytes free for checkpoints (to an unprivileged writer). */
  async freeBytes(): Promise<number> {
    await mkdir(this.root, { recursive: true, mode: 0o700 })
    const fs = await statfs(this.root)
    return fs.bavail * fs.bsize
  }

  /** The session's whole checkpoint folder. */
  dir(sid: string): string {
    return join(this.root, safe(sid))
  }

  /** Makes a written checkpoint owner-only, sums it and gives it the session's name (replacing an older one). */
  async seal(part: string, sid: string): Promise<SealedCheckpoint> {
    await restrict(part)
    const sum = await checksum(part)
    const dest = this.dir(sid)
    await rm(dest, { recursive: true, force: true })
    await rename(part, dest)
    return sum
  }

  /**
   * A copy of the folder `from` (hard links: checkpoint files are never written again) under a new
   * part name for `id`; seal() or place() names it. Snapshots and forks copy a checkpoint so.
   */
  async linkCopy(from: string, id: string): Promise<string> {
    const part = await this.partDir(id)
    await linkTree(from, part)
    return part
  }

  /** Names a copy made by linkCopy whose checksum is known already (a fork's or a restored snapshot's). */
  async place(part: string, id: string): Promise<void> {
    await rename(part, this.dir(id))
  }

  /** Throws CheckpointMismatch unless the session's checkpoint has exactly the recorded checksum. */
  async verify(sid: string, digest: string): Promise<void> {
    let sum: SealedCheckpoint
    try {
      sum = await checksum(this.dir(sid))
    } catch (err) {
      throw new CheckpointMismatch(`the checkpoint cannot be read (${(err as NodeJS.ErrnoException).code ?? String(err)})`)
    }
    if (!digest || sum.digest !== digest)
      throw new CheckpointMismatch('the checkpoint does not match the checksum recorded when it was written (it was changed or truncated)')
  }

  async remove(sid: string): Promise<void> {
    await rm(this.dir(sid), { recursive: true, force: true })
  }

  /** Removes folders no session names (`keep`), or left half-written, once past the grace period. Returns the names removed. */
  async sweep(keep: (sid: string) => Promise<boolean>, nowMs = Date.now()): Promise<string[]> {
    const removed: string[] = []
    for (const name of await readdir(this.root).catch(() => [])) {
      const path = join(this.root, name)
      const info = await lstat(path).catch(() => null)
      if (!info || nowMs - info.mtimeMs < SWEEP_GRACE_MS) continue
      if (SAFE_NAME.test(name) && info.isDirectory() && (await keep(name))) continue
      await rm(path, { recursive: true, force: true })
      removed.push(name)
    }
    return removed
  }

  /** Whole checkpoints on disk here and their bytes (for /metrics). */
  async usage(): Promise<{ checkpoints: number; bytes: number }> {
    let checkpoints = 0
    let bytes = 0
    for (const name of await readdir(this.root).catch(() => [])) {
      // Snapshots are counted from their records (replcast_snapshots).
      if (!SAFE_NAME.test(name) || name.startsWith(SNAPSHOT_PREFIX)) continue
      checkpoints++
      bytes += await folderBytes(join(this.root, name)).catch(() => 0)
    }
    return { checkpoints, bytes }
  }
}

function safe(sid: string): string {
  if (!SAFE_NAME.test(sid)) throw new Error(`not a session id: ${JSON.stringify(sid)}`)
  return sid
}

/** Every file of the folder, as paths relative to it, sorted (the checksum's stable order). */
async function files(dir: string, rel = ''): Promise<string[]> {
  const out: string[] = []
  for (const e of await readdir(join(dir, rel), { withFileTypes: true })) {
    const r = rel ? `${rel}/${e.name}` : e.name
    if (e.isDirectory()) out.push(...(await files(dir, r)))
    else if (e.isFile()) out.push(r)
    else throw new Error(`${r} is neither a file nor a folder`)
  }
  return out.sort()
}

/** sha256 over each file's name, length and bytes, in name order; and the bytes in all. */
async function checksum(dir: string): Promise<SealedCheckpoint> {
  const hash = createHash('sha256')
  let bytes = 0
  for (const rel of await files(dir)) {
    const path = join(dir, rel)
    const { size } = await stat(path)
    hash.update(`${rel}\0${size}\0`)
    for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer)
    bytes += size
  }
  return { digest: `sha256:${hash.digest('hex')}`, bytes }
}

async function restrict(dir: string): Promise<void> {
  await chmod(dir, 0o700)
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, e.name)
    if (e.isDirectory()) await restrict(path)
    else await chmod(path, 0o600)
  }
}

async function folderBytes(dir: string): Promise<number> {
  let n = 0
  for (const rel of await files(dir)) n += (await stat(join(dir, rel))).size
  return n
}

/** Hard links where the filesystem allows (no bytes copied), else copies; owner-only folders. */
async function linkTree(from: string, to: string): Promise<void> {
  await mkdir(to, { mode: 0o700 })
  for (const e of await readdir(from, { withFileTypes: true })) {
    const [src, dst] = [join(from, e.name), join(to, e.name)]
    if (e.isDirectory()) await linkTree(src, dst)
    else if (e.isFile()) await link(src, dst).catch((err: NodeJS.ErrnoException) => (err.code === 'EXDEV' ? copyFile(src, dst) : Promise.reject(err)))
  }
}
