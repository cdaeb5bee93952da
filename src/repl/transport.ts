// The byte channel a REPL client speaks over: a Docker attach socket in production,
// an in-memory pair or a child process's pipes in tests.
export interface ReplTransport {
  /** Writes bytes to the REPL's stdin. */
  write(data: string): void
  /** Bytes written but not yet taken by the other side (a REPL that stops reading makes it grow); absent: unknown. */
  bufferedBytes?(): number
  /** Stops handing over the REPL's stdout until resume(): it waits in the sandbox, whose writes then block. Absent: never held. */
  pause?(): void
  resume?(): void
  /** Registers the receiver of the REPL's stdout bytes. */
  onData(cb: (chunk: Buffer) => void): void
  /** Called once when the channel closes, for whatever reason. */
  onClose(cb: (err?: Error) => void): void
  /** Closes the channel from this side (never half-closes the REPL's stdin). */
  close(): void
}
