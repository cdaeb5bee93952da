// The MCP tools for a session's /workspace files: write (text, or base64 for binary), read (text as
// text, images as image content, other bytes as an embedded resource), list and delete. They go
// through the sessions layer's SessionFiles, like the HTTP file routes, so the same checks and errors apply.
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { Type } from 'typebox'
import { AppError } from '../errors.js'
import { OneShotBody, Session } from '../schemas.js'
import { closedWorld, json, text, tool, type ToolDef } from './tool-def.js'

/** The most read_file returns: a model cannot use more in one result, and the result travels as one JSON message. */
const READ_LIMIT = 1024 * 1024

// The API's own shape of an input file (a one-shot's `files`): its path, and the pattern of its base64.
const InputFile = OneShotBody.properties.files.items.properties
const BASE64 = new RegExp((InputFile.content_base64 as { pattern?: string }).pattern ?? '^$')

const PathArg = { ...InputFile.path, description: 'A path relative to /workspace, e.g. data/results.csv (absolute paths and ".." are refused)' }
const Encoding = Type.Union([Type.Literal('text'), Type.Literal('base64')], {
  description: 'text (default): content is the text itself, written as UTF-8. base64: content is base64, for binary files',
})

/** A file to write: its path, its content, and how the content is given. Also a one-shot's input file. */
export const FileContentArgs = Type.Object(
  { path: PathArg, content: Type.String({ description: "The file's content: text, or base64 with encoding: base64" }), encoding: Type.Optional(Encoding) },
  { additionalProperties: false },
)

/** The bytes `content` stands for. Throws bad_request for base64 that is not. */
export function decodeContent(content: string, encoding: 'text' | 'base64' = 'text'): Buffer {
  if (encoding === 'text') return Buffer.from(content, 'utf8')
  if (!BASE64.test(content)) throw new AppError('bad_request', 'content is not valid base64 (encoding: "base64"); send text with encoding: "text"')
  return Buffer.from(content, 'base64')
}

/** Formats told by their first bytes (not the file's name, which may lie): images an MCP client can show, and a few common others. */
const MAGIC: Array<[type: string, image: boolean, test: (b: Buffer) => boolean]> = [
  ['image/png', true, (b) => b.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))],
  ['image/jpeg', true, (b) => b.subarray(0, 3).equals(Buffer.from([0xff, 0xd8, 0xff]))],
  ['image/gif', true, (b) => /^GIF8[79]a/.test(b.subarray(0, 6).toString('latin1'))],
  ['image/webp', true, (b) => b.subarray(0, 4).toString('latin1') === 'RIFF' && b.subarray(8, 12).toString('latin1') === 'WEBP'],
  ['application/pdf', false, (b) => b.subarray(0, 5).toString('latin1') === '%PDF-'],
  ['application/zip', false, (b) => b.subarray(0, 4).equals(Buffer.from([0x50, 0x4b, 0x03, 0x04]))],
  ['application/gzip', false, (b) => b.subarray(0, 2).equals(Buffer.from([0x1f, 0x8b]))],
]

const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

/** The file's text when it is text (valid UTF-8 without NUL bytes), else null. */
function asText(bytes: Buffer): string | null {
  if (bytes.includes(0)) return null
  try {
    return UTF8.decode(bytes)
  } catch {
    return null
  }
}

/** read_file's result for a file's bytes. */
function fileContent(sid: string, path: string, bytes: Buffer): CallToolResult {
  const [mimeType, image] = MAGIC.find(([, , test]) => test(bytes)) ?? ['application/octet-stream', false]
  const data = bytes.toString('base64')
  if (image)
    return {
      content: [
        { type: 'image', data, mimeType },
        { type: 'text', text: `${path}: ${bytes.length} bytes, ${mimeType}` },
      ],
    }
  const asString = mimeType === 'application/octet-stream' ? asText(bytes) : null
  if (asString !== null) return text(asString)
  const uri = `replcast://sessions/${sid}/files/${path.split('/').map(encodeURIComponent).join('/')}`
  return {
    content: [
      { type: 'text', text: `${path}: ${bytes.length} bytes of binary data (${mimeType}), as an embedded resource (base64)` },
      { type: 'resource', resource: { uri, mimeType, blob: data } },
    ],
  }
}

const writeFile = tool({
  name: 'write_file',
  holder: true,
  title: 'Write a file',
  description:
    "Write a file into a session's /workspace (parent folders are created; an existing file is replaced whole). " +
    'Give text as it is, or binary data as base64 with encoding: "base64". run_python and run_bash see the file at once.',
  input: Type.Object({ session_id: Session.properties.id, ...FileContentArgs.properties }, { additionalProperties: false }),
  annotations: { ...closedWorld, readOnlyHint: false, destructiveHint: true, idempotentHint: true },
  async run(args, ctx) {
    const bytes = decodeContent(args.content, args.encoding)
    const { entry, created } = await ctx.files.put(ctx.tenant, args.session_id, args.path, [bytes], { contentLength: bytes.length, signal: ctx.call.signal })
    return text(`Wrote ${entry.path}: ${entry.size} bytes (${created ? 'a new file' : 'replaced'}).`)
  },
})

const readFile = tool({
  name: 'read_file',
  holder: true,
  title: 'Read a file',
  description:
    "Read a file from a session's /workspace. Text (UTF-8) comes back as text; PNG, JPEG, GIF and WebP images as images; " +
    `other binary data as an embedded resource (base64) with its type. Files above ${READ_LIMIT} bytes are refused: read part of them with run_bash or run_python.`,
  input: Type.Object({ session_id: Session.properties.id, path: PathArg }, { additionalProperties: false }),
  annotations: { ...closedWorld, readOnlyHint: true },
  async run(args, ctx) {
    const tooLarge = (size: unknown) =>
      new AppError(
        'payload_too_large',
        `${args.path} is ${typeof size === 'number' ? `${size} bytes` : 'larger than that'}; read_file returns at most ${READ_LIMIT}. ` +
          'Read part of it with run_bash (head -c, tail, grep) or run_python, or download it with GET /v1/sessions/{id}/files/{path}',
      )
    // A larger file is refused from its size, before its bytes move.
    const { entry, body } = await ctx.files
      .get(ctx.tenant, args.session_id, args.path, { maxBytes: READ_LIMIT, signal: ctx.call.signal })
      .catch((err: unknown) => {
        throw err instanceof AppError && err.code === 'file_too_large' ? tooLarge(err.extra.size) : err
      })
    // At most entry.size bytes come (a file that grew since is cut at its size then).
    const chunks: Buffer[] = []
    for await (const chunk of body as AsyncIterable<Buffer>) chunks.push(chunk)
    return fileContent(args.session_id, entry.path, Buffer.concat(chunks))
  },
})

const listFiles = tool({
  name: 'list_files',
  holder: true,
  title: 'List files',
  description:
    "List a folder of a session's /workspace (default: /workspace itself; recursive: everything below it): each entry's path, type (file or dir), size in bytes and modification time.",
  input: Type.Object(
    {
      session_id: Session.properties.id,
      path: Type.Optional({ ...PathArg, minLength: 0, description: 'The folder, relative to /workspace (default: /workspace itself)' }),
      recursive: Type.Optional(Type.Boolean({ description: 'Everything below the folder, not only its own entries (default false)' })),
    },
    { additionalProperties: false },
  ),
  annotations: { ...closedWorld, readOnlyHint: true },
  async run(args, ctx) {
    const listed = await ctx.files.list(ctx.tenant, args.session_id, args.path ?? '', args.recursive ?? false, { signal: ctx.call.signal })
    return text(json(listed))
  },
})

const deleteFile = tool({
  name: 'delete_file',
  holder: true,
  title: 'Delete a file',
  description: "Delete a file from a session's /workspace, or a folder with everything in it when recursive is true.",
  input: Type.Object(
    {
      session_id: Session.properties.id,
      path: PathArg,
      recursive: Type.Optional(Type.Boolean({ description: 'Needed to delete a folder (default false)' })),
    },
    { additionalProperties: false },
  ),
  annotations: { ...closedWorld, readOnlyHint: false, destructiveHint: true, idempotentHint: true },
  async run(args, ctx) {
    await ctx.files.delete(ctx.tenant, args.session_id, args.path, args.recursive ?? false, { signal: ctx.call.signal })
    return text(`Deleted ${args.path}.`)
  },
})

export const FILE_TOOLS: readonly ToolDef[] = [writeFile, readFile, listFiles, deleteFile]
