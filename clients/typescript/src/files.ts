// What the client's file and one-shot calls need besides a request: the body kinds an upload takes
// (a stream is sent as it is read, never gathered whole first), file paths in URLs, and one-shot
// input files given as text or bytes (the API takes base64).
import { InvalidRequestError } from './errors.ts'
import type { components } from './schema.ts'

type Schemas = components['schemas']
export type FileEntry = Schemas['FileEntry']
export type FileList = Schemas['FileList']
export type TemplateList = Schemas['TemplateList']
export type OneShotRequest = Schemas['OneShotRequest']

/** What putFile uploads: text (UTF-8), bytes, a Blob, or a stream (a web ReadableStream, a Node Readable, any async iterable of chunks). */
export type FileBody = string | Uint8Array | Blob | ReadableStream<Uint8Array> | AsyncIterable<Uint8Array | string>

/** An uploaded file's entry; `created` is false when it replaced one. */
export type PutFileResult = FileEntry & { created: boolean }

/** A download: the bytes as they arrive (read `body` once, or cancel it), with the type and size the server gave. */
export interface FileDownload {
  body: ReadableStream<Uint8Array>
  /** Guessed by the server from the file's name (text/csv, image/png, ...); application/octet-stream otherwise. */
  contentType: string
  size: number
}

/** A one-shot's input file: the API's own form (base64), or text or bytes the client encodes. */
export type InputFile = NonNullable<OneShotRequest['files']>[number] | { path: string; content: string | Uint8Array }

/** One-shot options: the API's request without `code`, input files in either form. */
export type OnceOptions = Omit<OneShotRequest, 'code' | 'files'> & { files?: InputFile[] }

/** A request body sent as it is (a file's bytes), not as JSON; `streamed` bodies need a half-duplex request. */
export class RawBody {
  readonly body: BodyInit
  readonly streamed: boolean

  constructor(body: FileBody) {
    if (typeof body === 'string' || body instanceof Uint8Array || body instanceof Blob) {
      this.body = body as BodyInit
      this.streamed = false
    } else {
      this.body = body instanceof ReadableStream ? body : fromIterable(body)
      this.streamed = true
    }
  }
}

/** An async iterable as a stream read only as fast as the request sends it (no read-ahead). */
function fromIterable(source: AsyncIterable<Uint8Array | string>): ReadableStream<Uint8Array> {
  const it = source[Symbol.asyncIterator]()
  const utf8 = new TextEncoder()
  return new ReadableStream<Uint8Array>(
    {
      async pull(ctrl) {
        const next = await it.next()
        if (next.done) ctrl.close()
        else ctrl.enqueue(typeof next.value === 'string' ? utf8.encode(next.value) : next.value)
      },
      async cancel(reason) {
        await it.return?.(reason)
      },
    },
    { highWaterMark: 0 },
  )
}

/**
 * A workspace path in a URL: each name percent-encoded, the slashes kept. A '..' is refused here as the
 * server refuses it (invalid_path): URL parsing would resolve it, encoded or not, and a/../b would quietly become b.
 */
export function filePath(path: string): string {
  const names = path.split('/')
  if (names.includes('..')) throw new InvalidRequestError('invalid_path', `invalid_path: ${JSON.stringify(path)}: '..' is not allowed`, { status: 400 })
  return names.map(encodeURIComponent).join('/')
}

/** The `mode` query value: octal digits (0o644 or '644'). */
export const modeQuery = (mode: number | string): string => (typeof mode === 'number' ? mode.toString(8) : mode)

function base64(bytes: Uint8Array): string {
  let s = ''
  // In slices: String.fromCharCode takes its arguments on the stack.
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000))
  return btoa(s)
}

/** The one-shot request body for `code` and `opts`, input files in the API's base64 form. */
export function oneShotBody(code: string, opts: OnceOptions): OneShotRequest {
  const { files, ...rest } = opts
  if (!files) return { code, ...rest }
  return {
    code,
    ...rest,
    files: files.map((f) =>
      'content' in f
        ? { path: f.path, content_base64: base64(typeof f.content === 'string' ? new TextEncoder().encode(f.content) : f.content) }
        : { path: f.path, content_base64: f.content_base64 },
    ),
  }
}
