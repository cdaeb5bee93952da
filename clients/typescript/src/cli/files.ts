// `replcast files put|get|ls|rm`: a session's /workspace files from a terminal. Uploads and
// downloads stream (a file of any size never sits whole in memory); '-' is stdin or stdout.
import { createReadStream, createWriteStream } from 'node:fs'
import { stat, unlink } from 'node:fs/promises'
import { basename } from 'node:path'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import type { ReadableStream as NodeWebStream } from 'node:stream/web'
import { EXIT, UsageError, type Command, type Context } from './common.ts'

const USAGE = `replcast files put LOCAL [REMOTE] --session ID [--mode 755]
replcast files get REMOTE [LOCAL|-] --session ID
replcast files ls [DIR] --session ID [-r] [--json]
replcast files rm REMOTE... --session ID [-r]

  -s, --session     the session (required)
  put               uploads LOCAL ('-' for stdin) to REMOTE, a path relative to /workspace
                    (default: LOCAL's name); parent folders are created, an existing file replaced
  get               downloads REMOTE to LOCAL (default: its name here; '-' for stdout)
  ls                lists DIR (default: /workspace itself); -r everything below it
  rm                deletes files; -r folders with everything in them
  --mode            put: octal permissions for the file (default 644)`

async function put(ctx: Context, sid: string, args: string[], mode: string | undefined): Promise<number> {
  const [local, remote, ...extra] = args
  if (!local || extra.length) throw new UsageError('files put takes LOCAL and an optional REMOTE')
  if (local === '-' && !remote) throw new UsageError('name the REMOTE path for stdin')
  if (mode !== undefined && !/^0?[0-7]{3}$/.test(mode)) throw new UsageError('--mode takes octal permissions such as 644 or 755')
  if (local !== '-') {
    const s = await stat(local).catch((err: NodeJS.ErrnoException) => {
      throw new UsageError(`cannot read ${local}: ${err.code ?? err.message}`)
    })
    if (!s.isFile()) throw new UsageError(`${local} is not a file`)
  }
  const body = local === '-' ? ctx.stdin : createReadStream(local, { highWaterMark: 256 * 1024 })
  const entry = await ctx.client.putFile(sid, remote ?? basename(local), body, { mode })
  ctx.io.out.write(`${entry.created ? 'created' : 'replaced'} ${entry.path} (${entry.size} bytes)\n`)
  return EXIT.ok
}

async function get(ctx: Context, sid: string, args: string[]): Promise<number> {
  const [remote, local = remote ? basename(remote) : undefined, ...extra] = args
  if (!remote || !local || extra.length) throw new UsageError('files get takes REMOTE and an optional LOCAL')
  const file = await ctx.client.getFile(sid, remote)
  const source = Readable.fromWeb(file.body as NodeWebStream<Uint8Array>)
  if (local === '-') {
    // The bytes as they are (binary too), with stdout's backpressure; stdout itself stays open.
    await pipeline(source, process.stdout, { end: false })
    return EXIT.ok
  }
  try {
    await pipeline(source, createWriteStream(local))
  } catch (err) {
    // A download cut off half-way must not look like the file.
    await unlink(local).catch(() => undefined)
    throw err
  }
  ctx.io.out.write(`${remote} → ${local} (${file.size} bytes)\n`)
  return EXIT.ok
}

async function ls(ctx: Context, sid: string, args: string[], recursive: boolean, asJson: boolean): Promise<number> {
  if (args.length > 1) throw new UsageError('files ls takes one folder')
  const listed = await ctx.client.listFiles(sid, { path: args[0], recursive })
  if (asJson) {
    ctx.io.out.write(`${JSON.stringify(listed, null, 2)}\n`)
    return EXIT.ok
  }
  const width = Math.max(0, ...listed.files.map((f) => String(f.size).length))
  for (const f of listed.files)
    ctx.io.out.write(`${f.type === 'dir' ? '-'.padStart(width) : String(f.size).padStart(width)}  ${f.modified_at}  ${f.path}${f.type === 'dir' ? '/' : ''}\n`)
  if (listed.truncated) ctx.io.err.write('replcast: the listing was cut at 10,000 entries\n')
  return EXIT.ok
}

async function rm(ctx: Context, sid: string, args: string[], recursive: boolean): Promise<number> {
  if (!args.length) throw new UsageError('name the files to delete')
  let code: number = EXIT.ok
  for (const path of args) {
    try {
      await ctx.client.deleteFile(sid, path, { recursive })
      ctx.io.out.write(`deleted ${path}\n`)
    } catch (err) {
      ctx.io.err.write(`replcast: ${path}: ${(err as Error).message}\n`)
      code = EXIT.api
    }
  }
  return code
}

export const filesCommand: Command = {
  summary: "copy files in and out of a session's /workspace (put, get, ls, rm)",
  usage: USAGE,
  options: {
    session: { type: 'string', short: 's' },
    recursive: { type: 'boolean', short: 'r' },
    mode: { type: 'string' },
    json: { type: 'boolean' },
  },
  async run(ctx, args, values) {
    const [sub, ...rest] = args
    const sid = values.session as string | undefined
    if (!sub) throw new UsageError('files needs a subcommand: put, get, ls or rm')
    if (!['put', 'get', 'ls', 'list', 'rm', 'delete'].includes(sub)) throw new UsageError(`unknown subcommand: files ${sub}`)
    if (!sid) throw new UsageError('name the session with --session ID (replcast sessions ls lists them)')
    const recursive = !!values.recursive
    if (sub === 'put') return put(ctx, sid, rest, values.mode as string | undefined)
    if (sub === 'get') return get(ctx, sid, rest)
    if (sub === 'ls' || sub === 'list') return ls(ctx, sid, rest, recursive, !!values.json)
    return rm(ctx, sid, rest, recursive)
  },
}
