// Workspace file routes: upload (raw body, streamed), download (streamed), list, delete.
// Bodies are the files' bytes, never JSON, and never held whole in memory.
import type { IncomingMessage } from 'node:http'
import { Readable } from 'node:stream'
import type { FastifyInstance, FastifyReply, FastifySchema } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { Type, type TSchema } from 'typebox'
import { FileEntry, FileList, SessionId } from '../../schemas.js'
import type { SessionFiles } from '../../sessions/index.js'
import { BINARY, contentTypeFor } from '../content-types.js'
import { problems, ref, SessionParams } from '../schema-refs.js'

const PATH_DESCRIPTION =
  'A file path relative to /workspace, percent-encoded; "/" separates folders (data/blob.bin). Absolute paths, "..", NUL bytes and paths that lead outside /workspace through a symbolic link answer 400 invalid_path.'

/** Fastify names the wildcard "*"; openapi.yaml calls it {path}. */
const FileParams = Type.Object({ id: SessionId, '*': Type.String({ description: PATH_DESCRIPTION }) })
const DocParams = Type.Object({ id: SessionId, path: Type.String({ description: PATH_DESCRIPTION }) })
const asPathParam = {
  // Run by the session's holder (src/http/holder-routing.ts): with several Docker engines, only it reaches the container.
  holder: true,
  swaggerTransform: ({ schema, url }: { schema: FastifySchema; url: string }) => ({
    url: url.replace('*', ':path'),
    schema: { ...schema, params: DocParams },
  }),
}

const Binary = { type: 'string', format: 'binary' } as const
const FILE_ERRORS = ['invalid_path', 'permission_denied', 'session_dead', 'sandbox_failed'] as const

/** Aborts when the client goes away before its answer is sent: the sandbox's file program is let go at once. */
function clientGone(reply: FastifyReply): AbortSignal {
  const ac = new AbortController()
  reply.raw.on('close', () => {
    if (!reply.raw.writableFinished) ac.abort()
  })
  return ac.signal
}

/**
 * Reads and drops what is left of a refused upload while the answer goes out, so the client gets it
 * (a socket closed with unread bytes is reset) and the connection stays usable; past `max` it closes.
 */
function drain(req: IncomingMessage, max: number): void {
  if (req.readableEnded || req.destroyed) return
  let dropped = 0
  req.on('data', (chunk: Buffer) => {
    dropped += chunk.length
    if (dropped > max) req.destroy()
  })
  req.resume()
}

export async function fileRoutes(app: FastifyInstance, { files, maxDrainBytes }: { files: SessionFiles; maxDrainBytes: number }): Promise<void> {
  const r = app.withTypeProvider<TypeBoxTypeProvider>()
  const tags = ['files']
  const security = [{ bearer: [] }]

  r.get(
    '/v1/sessions/:id/files',
    {
      config: { holder: true },
      schema: {
        operationId: 'listFiles',
        summary: "List a folder of the session's /workspace",
        tags,
        security,
        params: SessionParams,
        querystring: Type.Object(
          {
            path: Type.Optional(Type.String({ maxLength: 4096, description: 'The folder, relative to /workspace (default: /workspace itself)' })),
            recursive: Type.Optional(Type.Boolean({ default: false, description: 'Everything below it, not only its own entries' })),
          },
          { additionalProperties: false },
        ),
        response: {
          200: { ...ref(FileList), description: 'Its files and folders, sorted by path (a file path lists that one file)' },
          ...problems(...FILE_ERRORS, 'file_not_found'),
        },
      },
    },
    async (req, reply) => files.list(req.tenant, req.params.id, req.query.path ?? '', req.query.recursive ?? false, { signal: clientGone(reply) }),
  )

  r.get(
    '/v1/sessions/:id/files/*',
    {
      config: asPathParam,
      schema: {
        operationId: 'downloadFile',
        summary: 'Download a file (streamed)',
        tags,
        security,
        params: FileParams,
        querystring: Type.Object({}, { additionalProperties: false }),
        response: {
          200: {
            description:
              "The file's bytes, with content-length; content-type is guessed from the name (text/csv, image/png, ...), application/octet-stream otherwise. " +
              'A sandbox that stops sending them for FILE_STALL_TIMEOUT_MS cuts the response short',
            content: { [BINARY]: { schema: Binary } },
          },
          ...problems(...FILE_ERRORS, 'file_not_found', 'is_a_directory', 'file_too_large'),
        },
      },
    },
    async (req, reply) => {
      const { entry, body } = await files.get(req.tenant, req.params.id, req.params['*'], { signal: clientGone(reply) })
      reply.header('content-length', String(entry.size)).type(contentTypeFor(entry.path))
      if (req.method === 'HEAD') {
        // Not the bytes (Fastify's HEAD would read them all to throw away); an empty stream keeps content-length.
        body.destroy()
        return (reply as FastifyReply).send(Readable.from([]))
      }
      return (reply as FastifyReply).send(body)
    },
  )

  r.delete(
    '/v1/sessions/:id/files/*',
    {
      config: asPathParam,
      schema: {
        operationId: 'deleteFile',
        summary: 'Delete a file, or a folder with recursive=true',
        tags,
        security,
        params: FileParams,
        querystring: Type.Object(
          { recursive: Type.Optional(Type.Boolean({ default: false, description: 'Needed to delete a folder (with everything in it)' })) },
          { additionalProperties: false },
        ),
        response: {
          204: { description: 'Deleted (a symbolic link itself, never what it points at)', type: 'null' },
          ...problems(...FILE_ERRORS, 'file_not_found', 'is_a_directory'),
        },
      },
    },
    async (req, reply) => {
      await files.delete(req.tenant, req.params.id, req.params['*'], req.query.recursive ?? false, { signal: clientGone(reply) })
      ;(reply as FastifyReply).code(204).send()
    },
  )

  // The upload lives in a context of its own, where any content type is taken as the file's raw
  // bytes and left unread for the handler to stream (the JSON parser and body limit do not apply).
  await app.register(async (raw) => {
    raw.removeAllContentTypeParsers()
    // The body stays in req.raw; '' is what body validation sees (a binary string).
    raw.addContentTypeParser('*', (_req, _payload, done) => done(null, ''))
    raw.withTypeProvider<TypeBoxTypeProvider>().put(
      '/v1/sessions/:id/files/*',
      {
        config: asPathParam,
        schema: {
          operationId: 'uploadFile',
          summary: 'Upload a file (the raw body, streamed; parent folders are created; the file is replaced whole or not at all)',
          tags,
          security,
          params: FileParams,
          querystring: Type.Object(
            {
              mode: Type.Optional(
                Type.String({ pattern: '^0?[0-7]{3}$', description: 'Octal permissions, e.g. 644 or 0755 (default 644, or the replaced file’s)' }),
              ),
            },
            { additionalProperties: false },
          ),
          body: {
            content: { [BINARY]: { schema: { ...Binary, description: "The file's bytes (any content type is accepted and stored as is)" } } },
          } as unknown as TSchema,
          response: {
            200: { ...ref(FileEntry), description: 'An existing file was replaced' },
            201: { ...ref(FileEntry), description: 'A new file was created (Location names it)' },
            ...problems(...FILE_ERRORS, 'is_a_directory', 'workspace_full', 'payload_too_large'),
          },
        },
      },
      async (req, reply) => {
        const length = req.headers['content-length'] === undefined ? undefined : Number(req.headers['content-length'])
        const body = req.raw.iterator({ destroyOnReturn: false })
        const { entry, created } = await files
          .put(req.tenant, req.params.id, req.params['*'], body, {
            contentLength: Number.isFinite(length) ? length : undefined,
            mode: req.query.mode === undefined ? undefined : parseInt(req.query.mode, 8),
            signal: clientGone(reply as FastifyReply),
          })
          .catch((err: unknown) => {
            drain(req.raw, maxDrainBytes)
            throw err
          })
        reply.code(created ? 201 : 200)
        if (created) reply.header('location', `/v1/sessions/${req.params.id}/files/${entry.path.split('/').map(encodeURIComponent).join('/')}`)
        return entry
      },
    )
  })
}
