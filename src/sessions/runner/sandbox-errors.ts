// What an execution's client is told when its sandbox went away under it (the `error` event before
// its `done`): out of memory, stopped on its own, killed by the host after an ignored interrupt, or
// deleted or restarted before the execution started.
import type { SandboxExit } from '../../sandbox/driver.js'

export interface SandboxError {
  ename: string
  evalue: string
}

/** The sandbox stopped without the host asking: out of memory, or on its own. */
export function sandboxGoneError(exit: SandboxExit): SandboxError {
  return exit.oomKilled
    ? { ename: 'SandboxOutOfMemory', evalue: 'the sandbox ran out of memory (limits.memory_mb) and was killed' }
    : { ename: 'SandboxDied', evalue: `the sandbox stopped unexpectedly (exit code ${exit.exitCode ?? 'unknown'}); restart the session or create a new one` }
}

/** The host killed the sandbox: the running code ignored an interrupt for `graceMs`. */
export function sandboxKilledError(graceMs: number): SandboxError {
  return {
    ename: 'SandboxKilled',
    evalue: `the code did not stop within ${graceMs} ms of the interrupt, so the sandbox was killed; restart the session to continue`,
  }
}

/** The session was deleted or restarted while the execution was being queued. */
export const NOT_STARTED_ERROR: SandboxError = { ename: 'SandboxError', evalue: 'the session was deleted or restarted before this execution started' }
