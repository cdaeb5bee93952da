// What the sessions layer needs from wherever sandboxes run, as one interface: today's
// implementation is the Docker engine (docker-driver.ts); another (a Kubernetes driver, a pod per
// session, see docs/kubernetes.md) would be a new file implementing it, not a change to sessions.
import type { ReplTransport } from '../repl/transport.js'
import type { SandboxSpec } from './container-spec.js'
import type { WorkspaceFiles } from './workspace-files.js'
import type { SandboxTerminal, TerminalSize } from './sandbox-terminal.js'

/** Why a checkpoint or a restore failed; `noSpace` when a disk was full. */
export class CheckpointError extends Error {
  override name = 'CheckpointError'
  constructor(
    message: string,
    readonly noSpace: boolean,
    opts: { cause?: unknown } = {},
  ) {
    super(message, opts)
  }
}

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

/** A sandbox started from a checkpoint, and how long each step took (ms): container create, checkpoint placed, attach and start. */
export interface RestoredSandbox extends SandboxHandle {
  phasesMs: { create: number; place: number; start: number }
}

export interface ManagedContainer {
  id: string
  /** '' for a warm-pool sandbox: Redis records the session that took it. */
  sessionId: string
  /** Its container name (no leading slash). */
  name: string
  /** The API instance that made it. */
  instance: string
  pooled: boolean
  state: string
}

/** What a sandbox template's image says it runs (null: no such image). */
export interface ImageFacts {
  command: string[]
  labels: Record<string, string>
}

/** What the engine's memory is promised to (sessions/supply/host-capacity.ts decides from it). */
export interface SandboxMemory {
  /** The engine host's memory in bytes. */
  totalBytes(): Promise<number>
  /** The memory limit in bytes of each live replcast sandbox on the engine (any deployment), by session id. */
  sandboxLimits(): Promise<Map<string, number>>
}

/** A session's /workspace files, moved by a short program run inside the sandbox (not over the REPL). */
export type SandboxFiles = Pick<WorkspaceFiles, 'put' | 'get' | 'list' | 'delete' | 'startedAt'>

/** An interactive bash in a pseudo-terminal inside a sandbox (sandbox-terminal.ts). */
export type Terminal = Pick<SandboxTerminal, 'output' | 'input' | 'ended' | 'resize' | 'close'>

export interface SandboxDriver {
  /** The engine's stable id (Docker: `docker info` ID): sessions record it, instances on one engine share it. */
  engineId(): Promise<string>
  /** Creates and starts a sandbox, its REPL channel attached before it starts; on failure nothing is left. */
  create(spec: SandboxSpec): Promise<SandboxHandle>
  /** Why a sandbox of `runtime` cannot be checkpointed on this engine (said to the client as is); null when it can. */
  checkpointRefusal(runtime: string): Promise<string | null>
  /**
   * Writes the running sandbox's checkpoint (its memory and its tmpfs files) into `dir`, which must
   * not exist yet (its parent must), and returns once the sandbox has stopped. Throws CheckpointError
   * (then the sandbox runs on as it was) or TimeoutError.
   */
  checkpoint(containerId: string, dir: string): Promise<void>
  /**
   * Programs running in the sandbox beside its REPL (Docker: execs: a terminal's shell, the workspace
   * file program). A checkpoint taken while one runs holds its host file descriptors and cannot be
   * restored, so none may run then.
   */
  runningExecs(containerId: string): Promise<number>
  /** Creates a sandbox like create() and starts it from the checkpoint in `dir`, its REPL channel attached first (no `ready` comes); on failure nothing is left. */
  restore(spec: SandboxSpec, dir: string): Promise<RestoredSandbox>
  /** Attaches again to a running sandbox (after an API restart, or another instance's death). */
  adopt(containerId: string, sessionId: string): Promise<SandboxHandle>
  /** Stops the REPL process and starts it again in the same sandbox. */
  restart(containerId: string, sessionId: string): Promise<SandboxHandle>
  /** The REPL's stdout as the sandbox's log kept it since `sinceMs` (frames written while no one was attached). */
  readStdoutLog(containerId: string, sinceMs: number): Promise<Buffer>
  kill(containerId: string): Promise<void>
  /** Removes the sandbox; one already gone is success. */
  remove(containerId: string): Promise<void>
  /**
   * Names a taken warm-pool sandbox after the session it serves, as a cold one is named at create
   * (Docker: renamed `containerName(sessionId)`; its labels are fixed at create). One gone is success.
   */
  nameAfterSession(containerId: string, sessionId: string): Promise<void>
  inspectExit(containerId: string): Promise<SandboxExit & { running: boolean }>
  /** This deployment's sandboxes on this engine (for the orphan sweeps). */
  listManaged(deployment: string): Promise<ManagedContainer[]>
  imageFacts(image: string): Promise<ImageFacts | null>
  runtimes(): Promise<Set<string>>
  ping(): Promise<void>
  readonly memory: SandboxMemory
  /** The workspace file program's host side, run as `user` inside each sandbox; no wait on it goes `stallMs` without progress. */
  workspaceFiles(user: string, stallMs: number): SandboxFiles
  /** Starts an interactive bash in a pseudo-terminal of `size`, as `user`, in the sandbox's /workspace. Throws SandboxNotRunningError. */
  openTerminal(containerId: string, user: string, size: TerminalSize): Promise<Terminal>
}
