// `replcast hibernate SESSION...` and `replcast wake SESSION...`: a session's state to disk and back.
import type { Session } from '../client.ts'
import { EXIT, UsageError, type Command, type Context } from './common.ts'

/** Runs `call` on each named session, printing one line (or the sessions as JSON); exit 3 if any failed. */
async function eachSession(
  { io }: Context,
  ids: string[],
  values: Record<string, unknown>,
  call: (id: string) => Promise<Session>,
  line: (s: Session) => string,
): Promise<number> {
  if (!ids.length) throw new UsageError('name the sessions (replcast sessions ls lists them)')
  let code: number = EXIT.ok
  const done: Session[] = []
  for (const id of ids) {
    try {
      const s = await call(id)
      done.push(s)
      if (!values.json) io.out.write(`${line(s)}\n`)
    } catch (err) {
      io.err.write(`replcast: ${id}: ${(err as Error).message}\n`)
      code = EXIT.api
    }
  }
  if (values.json) io.out.write(`${JSON.stringify(done, null, 2)}\n`)
  return code
}

export const hibernateCommand: Command = {
  summary: 'put sessions to sleep: their state on disk, no memory held, woken by any use',
  usage: `replcast hibernate SESSION... [--json]

Checkpoints each session's sandbox (variables, imports, workspace files, cwd, environment) to disk
and removes it. The next run, file or process call wakes it with its state as it was (or replcast
wake SESSION does it ahead of time). Needs a runsc session (a runc one answers not_supported);
a session running code answers session_busy. Hibernating a hibernated session changes nothing.`,
  options: { json: { type: 'boolean' } },
  run: (ctx, args, values) =>
    eachSession(
      ctx,
      args,
      values,
      (id) => ctx.client.hibernate(id),
      (s) => `hibernated ${s.id} (at ${s.hibernated_at ?? 'unknown'}, kept until ${s.expires_at})`,
    ),
}

export const wakeCommand: Command = {
  summary: 'wake hibernated sessions now, ahead of their next use',
  usage: `replcast wake SESSION... [--json]

Restores each hibernated session's sandbox with its state as it was; a session already awake is
left as it is. Any use wakes a session too: this only saves the first run the wait.`,
  options: { json: { type: 'boolean' } },
  run: (ctx, args, values) =>
    eachSession(
      ctx,
      args,
      values,
      (id) => ctx.client.wake(id),
      (s) => `${s.status} ${s.id}`,
    ),
}
