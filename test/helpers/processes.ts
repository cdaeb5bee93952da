// Calls on a session's background processes for tests: start one, read its output as SSE (from
// the start or after an id), and run a bash execution to look inside the sandbox.
import { API_KEY } from './app.js'
import { api, readSse, stdoutOf, type SseEvent } from './client.js'

export async function startProcess(base: string, sid: string, body: Record<string, unknown>, key = API_KEY): Promise<any> {
  const r = await api(base, 'POST', `/v1/sessions/${sid}/processes`, body, { key })
  if (r.status !== 201) throw new Error(`process start failed: ${r.status} ${JSON.stringify(r.body)}`)
  return r.body
}

/** GET .../output with Accept: text/event-stream (after `lastId` when given). */
export function outputOf(base: string, sid: string, pid: string, lastId?: string, query = '', key = API_KEY): Promise<Response> {
  return fetch(`${base}/v1/sessions/${sid}/processes/${pid}/output${query}`, {
    headers: { authorization: `Bearer ${key}`, accept: 'text/event-stream', ...(lastId ? { 'last-event-id': lastId } : {}) },
  })
}

/** The process's output to its `exit` (or until `until`). */
export async function readOutput(base: string, sid: string, pid: string, until?: (e: SseEvent) => boolean): Promise<SseEvent[]> {
  const res = await outputOf(base, sid, pid)
  if (res.status !== 200) throw new Error(`output answered ${res.status}: ${await res.text()}`)
  return readSse(res, until ?? ((e) => e.event === 'exit'))
}

export const stderrOf = (events: SseEvent[]) =>
  events
    .filter((e) => e.event === 'stderr')
    .map((e) => e.data.text)
    .join('')

/** Runs a bash script in the session and returns its stdout. */
async function bashIn(base: string, sid: string, code: string): Promise<string> {
  const res = await fetch(`${base}/v1/sessions/${sid}/executions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({ code, language: 'bash' }),
  })
  return stdoutOf(await readSse(res, (e) => e.event === 'done'))
}

/** How many processes in the sandbox have a command line containing `needle` (read from /proc inside it). */
export async function countInSandbox(base: string, sid: string, needle: string): Promise<number> {
  const script = `n=0; for p in /proc/[0-9]*; do c=$(tr '\\0' ' ' < $p/cmdline 2>/dev/null); case "$c" in *'${needle}'*) n=$((n+1));; esac; done; echo $n`
  return Number((await bashIn(base, sid, script)).trim())
}

/** Writes `body` to the process's stdin. */
export function writeStdin(base: string, sid: string, pid: string, body: string | Buffer, eof = false, key = API_KEY): Promise<Response> {
  return fetch(`${base}/v1/sessions/${sid}/processes/${pid}/stdin${eof ? '?eof=true' : ''}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/octet-stream' },
    body: typeof body === 'string' ? body : new Uint8Array(body),
  })
}
