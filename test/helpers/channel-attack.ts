// What the hostile-channel tests share: Python that reaches the REPL's private channel from
// sandbox code (the REPL and the user's code share one process), and the API process's figures
// (resident memory, its peak, log lines) read before and after an attack.
import { readFileSync } from 'node:fs'
import type { ServerProcess } from './server-process.js'

/**
 * Prepended to attack code: `_ch` is the REPL's Channel (private fds `in_fd`/`out_fd`, `send`,
 * `flush`), `_me` the running execution's id, `raw(frame)` writes a frame straight onto the
 * channel (after the writer thread's queue is flushed, so no line interleaves with its frames).
 */
export const CHANNEL_PRELUDE = [
  'import gc, json, os, time',
  'from replcast_repl.protocol import Channel',
  'from replcast_repl.executor import Executor',
  '_ch = next(o for o in gc.get_objects() if isinstance(o, Channel))',
  '_me = next(o for o in gc.get_objects() if isinstance(o, Executor)).current.exec_id',
  'def raw(frame):',
  '    _ch.flush()',
  '    data = (json.dumps(frame) + "\\n").encode()',
  '    while data:',
  '        data = data[os.write(_ch.out_fd, data):]',
  '',
].join('\n')

export interface ProcessFigures {
  rssMb: number
  peakRssMb: number
  logLines: number
  logBytes: number
}

/** The API child process's resident memory (now and its high-water mark) and how much it has logged. */
export function figuresOf(p: ServerProcess): ProcessFigures {
  const status = readFileSync(`/proc/${p.child.pid}/status`, 'utf8')
  const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? NaN)
  const out = p.output()
  return {
    rssMb: kb('VmRSS') / 1024,
    peakRssMb: kb('VmHWM') / 1024,
    logLines: out.split('\n').length - 1,
    logBytes: Buffer.byteLength(out),
  }
}

export const fmtFigures = (name: string, before: ProcessFigures, after: ProcessFigures) =>
  `${name}: API rss ${before.rssMb.toFixed(0)} -> ${after.rssMb.toFixed(0)} MB (peak ${before.peakRssMb.toFixed(0)} -> ${after.peakRssMb.toFixed(0)} MB), ` +
  `log +${after.logLines - before.logLines} lines / +${((after.logBytes - before.logBytes) / 1024).toFixed(1)} KiB`

/** Log lines the API wrote about one session since `fromByte` of its output. */
export function logLinesAbout(p: ServerProcess, sessionId: string, fromByte = 0): string[] {
  return p
    .output()
    .slice(fromByte)
    .split('\n')
    .filter((l) => l.includes(sessionId))
}
