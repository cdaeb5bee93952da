// Checkpoints on disk that no session names any more (a crash between writing one and recording it,
// a session deleted while its instance was away) are removed; a dead session's refused checkpoint is
// kept until the session is deleted. Snapshots' folders are kept while their record is, and expired
// snapshots are deleted here too.
import type { Logger } from 'pino'
import type { Stores } from '../store/stores.js'
import type { Snapshots } from './snapshots.js'
import { type CheckpointStore, SNAPSHOT_PREFIX } from './supply/index.js'

export class CheckpointSweep {
  constructor(
    private readonly deps: { stores: Pick<Stores, 'sessions' | 'snapshots'>; checkpoints: CheckpointStore; snapshots: Pick<Snapshots, 'expire'>; log: Logger },
  ) {}

  /** Deletes expired snapshots, then removes the checkpoint folders no session or snapshot record names. */
  async sweep(): Promise<void> {
    const { stores, checkpoints, log } = this.deps
    await this.deps.snapshots.expire()
    const removed = await checkpoints.sweep(async (name) =>
      name.startsWith(SNAPSHOT_PREFIX) ? Boolean(await stores.snapshots.get(name)) : Boolean((await stores.sessions.getSession(name))?.checkpoint_digest),
    )
    if (removed.length) log.warn({ removed }, 'removed checkpoints no session or snapshot names')
  }
}
