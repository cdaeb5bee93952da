// @replcast/client: a typed client for the replcast API, with resumable event streams and typed errors.
export { ReplcastClient, ExecutionStream } from './client.ts'
export type {
  ClientOptions,
  StreamOptions,
  Session,
  SessionList,
  CreateSessionRequest,
  Execution,
  ExecuteRequest,
  Process,
  ProcessSignal,
  StartProcessRequest,
} from './client.ts'
export type { FileBody, FileDownload, FileEntry, FileList, InputFile, OnceOptions, OneShotRequest, PutFileResult, TemplateList } from './files.ts'
export { EventStream } from './events.ts'
export { Pty } from './pty.ts'
export type { PtyEnd, PtyOptions, WebSocketConstructor, WebSocketLike } from './pty.ts'
export type { ExecutionEvent, DoneStatus, FollowOptions, OpenEvents } from './events.ts'
export {
  ReplcastError,
  InvalidRequestError,
  AuthError,
  ForbiddenError,
  NotFoundError,
  ConflictError,
  RateLimitError,
  ServerError,
  ConnectionError,
  ERROR_CODES,
} from './errors.ts'
export type { ErrorCode, ProblemCode, Problem } from './errors.ts'
export { SseParser } from './sse.ts'
export type { SseMessage } from './sse.ts'
export type { paths, components } from './schema.ts'
