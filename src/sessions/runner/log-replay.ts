// Resuming an execution after a re-adoption without trusting anything the sandbox wrote: which of
// its frames in the container's log the host has not handled yet (by position: the host counted the
// frames it handled), and which live frames after attaching the log already gave (by content, as the
// attach stream and the log carry the same lines). The REPL's `seq` is only a hint where the log was
// cut at its size bound; a forged seq can then only cost its own session output, never drop later frames.
import { executionOf, parseFrame } from '../../repl/repl-client.js'
import type { ReplFrame } from '../../repl/protocol.js'

/** Where the host was in an execution's frames: how many it handled, and the REPL seq of the last it logged (-1: none). */
export interface ResumePoint {
  pos: number
  seq: number
}

export interface Replay {
  /** The logged frames the host has not handled, in order. */
  frames: ReplFrame[]
  /** The log no longer reaches back to the last frame the host handled: output in between is lost. */
  lost: boolean
}

/** `logged`: the execution's frames in its container log, in order. */
export function framesToReplay(logged: ReplFrame[], point: ResumePoint): Replay {
  // Every execution's first frame is the REPL's `status running`: if the log still holds it, the
  // log is whole and positions count from it.
  const first = logged[0]
  if (!first || (first.type === 'status' && first.state === 'running')) return { frames: logged.slice(Math.max(0, point.pos)), lost: false }
  // The log was cut (it keeps its last 2 MB): anchor on the last frame the host logged.
  const at = findLastIndex(logged, (f) => f.seq === point.seq)
  if (at >= 0) return { frames: logged.slice(at + 1), lost: false }
  return { frames: logged, lost: !(typeof first.seq === 'number' && first.seq === point.seq + 1) }
}

/**
 * Live frames after attaching: the first ones may be the log's last ones (written after the attach
 * but before the log was read). The first live frame is looked up in the log; while the following
 * ones repeat what came after it there, they are dropped. After the first new frame, all pass.
 */
export class LiveOverlap {
  private next = -1
  private done = false
  private readonly logged: string[]

  /** `logged`: the execution's frames in its container log (handled before, or replayed now). */
  constructor(logged: ReplFrame[]) {
    this.logged = logged.map((f) => JSON.stringify(f))
    if (this.logged.length === 0) this.done = true
  }

  /** Whether a live frame is new (false: the log already gave it). */
  isNew(f: ReplFrame): boolean {
    if (this.done) return true
    const key = JSON.stringify(f)
    if (this.next < 0) {
      const at = this.logged.indexOf(key)
      if (at < 0) return this.pass()
      this.next = at + 1
      return false
    }
    if (this.next < this.logged.length && this.logged[this.next] === key) {
      this.next++
      return false
    }
    return this.pass()
  }

  private pass(): boolean {
    this.done = true
    this.logged.length = 0
    return true
  }
}

function findLastIndex<T>(a: T[], pred: (x: T) => boolean): number {
  for (let i = a.length - 1; i >= 0; i--) if (pred(a[i]!)) return i
  return -1
}

/**
 * Where one frame ends and the next begins on a line read back from the container log: Docker's
 * `local` driver (20.10) drops the newline after a line it stored in 16 kB parts, gluing the next
 * frame to it. A frame's JSON is ASCII with escaped quotes, so `}{"v":` occurs only between frames.
 */
const GLUED = /(?<=\})(?=\{"v":)/

/** The frames routed to execution `execId` in a stretch of the REPL's stdout as its log gives it back, in order. */
export function executionFrames(stdout: Buffer, execId: string): ReplFrame[] {
  const frames: ReplFrame[] = []
  for (const line of stdout.toString('utf8').split('\n')) {
    for (const part of line.split(GLUED)) {
      const f = parseFrame(part)
      if (f && executionOf(f) === execId) frames.push(f)
    }
  }
  return frames
}
