// Test helpers for workspace files: raw-byte uploads and downloads, requests whose path is sent
// exactly as written (no URL normalisation), Python run in the session to look at its disk, and
// a process's resident memory.
import { request } from 'node:http'
import { readFileSync } from 'node:fs'
import { API_KEY } from './app.js'
import { executeSse, stdoutOf } from './client.js'

export interface FileAnswer {
  status: number
  headers: Headers
  bytes: Buffer
  /** The body as JSON, when it is JSON (problems, file entries, listings). */
  json: any
}

/** /v1/sessions/{sid}/files/{path}, each name percent-encoded. */
export function fileUrl(base: string, sid: string, path: string, query = ''): string {
  return `${base}/v1/sessions/${sid}/files/${path.split('/').map(encodeURIComponent).join('/')}${query ? `?${query}` : ''}`
}

export async function fileRequest(
  method: string,
  url: string,
  body?: Buffer | ReadableStream<Uint8Array> | string,
  opts: { key?: string; headers?: Record<string, string> } = {},
): Promise<FileAnswer> {
  const res = await fetch(url, {
    method,
    headers: { authorization: `Bearer ${opts.key ?? API_KEY}`, ...(body !== undefined ? { 'content-type': 'application/octet-stream' } : {}), ...opts.headers },
    body,
    ...(body instanceof ReadableStream ? { duplex: 'half' } : {}),
  } as RequestInit)
  const bytes = Buffer.from(await res.arrayBuffer())
  let json: any = null
  try {
    json = JSON.parse(bytes.toString('utf8'))
  } catch {
    /* the file's bytes */
  }
  return { status: res.status, headers: res.headers, bytes, json }
}

export const putFile = (
  base: string,
  sid: string,
  path: string,
  body: Buffer | string,
  opts: { key?: string; headers?: Record<string, string>; query?: string } = {},
) => fileRequest('PUT', fileUrl(base, sid, path, opts.query), body, opts)
export const getFile = (base: string, sid: string, path: string, key?: string) => fileRequest('GET', fileUrl(base, sid, path), undefined, { key })
export const deleteFile = (base: string, sid: string, path: string, query = '', key?: string) =>
  fileRequest('DELETE', fileUrl(base, sid, path, query), undefined, { key })
export const listFiles = (base: string, sid: string, query = '', key?: string) =>
  fileRequest('GET', `${base}/v1/sessions/${sid}/files${query ? `?${query}` : ''}`, undefined, { key })

/** A request whose path goes out byte for byte as given (fetch would resolve `..` and re-encode). */
export function rawRequest(base: string, method: string, rawPath: string, body?: Buffer): Promise<{ status: number; json: any; text: string }> {
  const url = new URL(base)
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        method,
        path: rawPath,
        headers: { authorization: `Bearer ${API_KEY}`, ...(body ? { 'content-type': 'application/octet-stream', 'content-length': body.length } : {}) },
      },
      (res) => {
        const parts: Buffer[] = []
        res.on('data', (b: Buffer) => parts.push(b))
        res.on('end', () => {
          const text = Buffer.concat(parts).toString('utf8')
          let json: any = null
          try {
            json = JSON.parse(text)
          } catch {
            /* not JSON */
          }
          resolve({ status: res.statusCode ?? 0, json, text })
        })
      },
    )
    req.on('error', reject)
    req.end(body)
  })
}

/**
 * Python that sets `procs` to the command line (bytes) of every process the sandbox can see. A
 * process that exits while it is listed is skipped: its /proc entry goes between the listing and
 * the read (ENOENT, or ESRCH once it is reaped).
 */
export const LIST_PROCESSES = `import os
def _cmdline(p):
    try:
        with open(f'/proc/{p}/cmdline', 'rb') as f:
            return f.read()
    except (FileNotFoundError, ProcessLookupError):
        return b''
procs = [_cmdline(p) for p in os.listdir('/proc') if p.isdigit()]`

/** Runs Python in the session and returns its stdout; throws unless it ends ok. */
export async function python(base: string, sid: string, code: string): Promise<string> {
  const r = await executeSse(base, sid, code)
  const done = r.events.find((e) => e.event === 'done')
  if (done?.data.status !== 'ok') throw new Error(`python failed: ${JSON.stringify(r.events.filter((e) => e.event !== 'stdout').map((e) => e.data))}`)
  return stdoutOf(r.events)
}

/** Resident memory of a process, in bytes. */
export function rssOf(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return Number(m?.[1] ?? 0) * 1024
}
