// Checkpoints on disk that no session names any more (a crash between writing one and recording it,
// a session deleted while its instance was away) are removed; a dead session's refused checkpoint is
// kept until the session is deleted.
import type { Logger } from 'pino'
import type { Stores } from '../store/stores.js'
import type { CheckpointStore } from './supply/index.js'

export class CheckpointSweep {
  constructor(private readonly deps: { stores: Pick<Stores, 'sessions'>; checkpoints: CheckpointStore; log: Logger }) {}

  /** Removes the checkpoint folders no session record names. */
  async sweep(): Promise<void> {
    const { stores, checkpoints, log } = this.deps
    const removed = await checkpoints.sweep(async (sid) => Boolean((await stores.sessions.getSession(sid))?.checkpoint_digest))
    if (removed.length) log.warn({ removed }, 'removed checkpoints no session names')
  }
}
