// What an in-process app waits for while it answers one request: the Redis commands it sends (in
// groups: the commands sent in one synchronous run of code go out together, so each group after the
// first waited for something) and the Docker engine calls it starts, between the API receiving the
// request and finishing its response. For tests of what lies on a request's critical path.
import diagnostics from 'node:diagnostics_channel'
import type { ClientRequest, IncomingMessage } from 'node:http'
import { Redis } from 'ioredis'

interface SentCommand {
  /** The synchronous run of code it was sent in (1, 2, ...). */
  group: number
  name: string
  args: string[]
}

export interface Waits {
  /** Redis commands the app sent from the request's arrival to its response's end. */
  commands: SentCommand[]
  /** Docker engine calls (method and path) started in that time. */
  docker: string[]
}

let recording: { commands: SentCommand[]; docker: string[]; from: number; until: number } | null = null
let installed = false
const ignored = new WeakSet<Redis>()

function install(): void {
  if (installed) return
  installed = true
  let group = 0
  let open = false
  const proto = Redis.prototype as unknown as { sendCommand: (this: Redis, c: unknown, s?: unknown, n?: unknown) => unknown }
  const send = proto.sendCommand
  proto.sendCommand = function (this: Redis, command: unknown, stream?: unknown, node?: unknown) {
    const r = recording
    if (r && !ignored.has(this)) {
      if (!open) {
        open = true
        group++
        queueMicrotask(() => {
          open = false
        })
      }
      const c = command as { name: string; args: unknown[] }
      r.commands.push({ group, name: c.name.toLowerCase(), args: c.args.map((a) => (Buffer.isBuffer(a) ? a.toString() : String(a))) })
    }
    return send.call(this, command, stream, node)
  }
  diagnostics.subscribe('http.client.request.start', (m) => {
    const req = (m as { request: ClientRequest }).request
    if (recording) recording.docker.push(`${req.method} ${req.path.replace(/\?.*$/, '')}`)
  })
}

/**
 * Runs `request` (one call to the app in this process) and returns what the app waited for while
 * it answered: only what happened between the API receiving a request and finishing its response.
 * `redis`: the test's own connection, left out.
 */
export async function waitsOf(redis: Redis, request: () => Promise<void>): Promise<Waits> {
  install()
  ignored.add(redis)
  const all = { commands: [] as SentCommand[], docker: [] as string[], from: -1, until: -1 }
  const marks: Array<{ kind: 'in' | 'out'; commands: number; docker: number }> = []
  const onIn = (m: unknown) => {
    if ((m as { request: IncomingMessage }).request.url?.startsWith('/metrics')) return
    marks.push({ kind: 'in', commands: all.commands.length, docker: all.docker.length })
  }
  const onOut = (m: unknown) => {
    if ((m as { request: IncomingMessage }).request.url?.startsWith('/metrics')) return
    marks.push({ kind: 'out', commands: all.commands.length, docker: all.docker.length })
  }
  diagnostics.subscribe('http.server.request.start', onIn)
  diagnostics.subscribe('http.server.response.finish', onOut)
  recording = all
  try {
    await request()
  } finally {
    recording = null
    diagnostics.unsubscribe('http.server.request.start', onIn)
    diagnostics.unsubscribe('http.server.response.finish', onOut)
  }
  const from = marks.find((m) => m.kind === 'in')
  const until = marks.find((m) => m.kind === 'out')
  if (!from || !until) throw new Error('the request never reached the app, or it never finished its response')
  return { commands: all.commands.slice(from.commands, until.commands), docker: all.docker.slice(from.docker, until.docker) }
}

/** The groups (see SentCommand) of the commands that name `id` in a key or an argument. */
export function groupsNaming(w: Waits, id: string): number[] {
  return [...new Set(w.commands.filter((c) => c.args.some((a) => a.includes(id))).map((c) => c.group))]
}
