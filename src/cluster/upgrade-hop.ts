// The hop of a WebSocket upgrade (a session's terminal, GET /v1/sessions/{id}/pty) to the instance
// holding the session: the upgrade request goes there signed like any hop (forward.ts), and once the
// holder answers 101 the client's connection and the holder's are joined byte for byte, with
// backpressure both ways, until either side closes. Any other answer (a refusal, a problem) comes
// back as an ordinary answer, and a refusal is tried again like any hop's.
import { request, type IncomingMessage, type ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'
import { declined, FORWARDED_HEADER, originOf, pass, relay, type HopOutcome, type HopSigner } from './forward.js'

/** The client's side of an upgrade request: its connection, and the bytes that came after the request's head. */
export interface Upgrade {
  socket: Duplex
  head: Buffer
}

export class Tunnels {
  /** Tunnels and upgrade hops under way: ended when the instance stops (their clients connect again). */
  private readonly open = new Set<() => void>()

  /**
   * Passes the upgrade request `req` (path and query as they came, signed by `sign`) to the instance at
   * `origin`. `onAnswer` is called once, before anything is written to the client: from then on the
   * connection is this hop's. A non-101 answer is written to `res` (the upgrade's response object).
   */
  tunnel(req: IncomingMessage, res: ServerResponse, client: Upgrade, origin: string, sign: HopSigner, onAnswer: () => void): Promise<HopOutcome> {
    return new Promise((resolve) => {
      const path = req.url ?? ''
      let to: ReturnType<typeof originOf>
      try {
        if (!path.startsWith('/')) throw new Error('only an origin-form request target is passed on')
        to = originOf(origin)
      } catch (err) {
        resolve({ kind: 'unreachable', reused: false, reached: false, err: err as Error })
        return
      }
      const headers = { ...pass(req.headers), connection: 'Upgrade', upgrade: req.headers.upgrade ?? 'websocket', [FORWARDED_HEADER]: sign('GET', path) }
      // A connection of its own (no keep-alive pool): it becomes the tunnel.
      const hop = request({ ...to, path, method: 'GET', headers, agent: false })
      let settled = false
      let answering = false
      let joined: Duplex | null = null
      const end = () => {
        hop.destroy()
        joined?.destroy()
        client.socket.destroy()
      }
      const settle = (o: HopOutcome) => {
        if (settled) return
        settled = true
        client.socket.off('close', clientGone)
        resolve(o)
      }
      const answer = () => {
        if (answering) return
        answering = true
        onAnswer()
      }
      const clientGone = () => {
        hop.destroy()
        answer()
        this.open.delete(end)
        settle({ kind: 'gone' })
      }
      client.socket.once('close', clientGone)
      this.open.add(end)

      hop.once('upgrade', (theirAnswer: IncomingMessage, theirs: Duplex, theirHead: Buffer) => {
        answer()
        // The holder's 101 as it wrote it: its Sec-WebSocket-Accept answers the client's own key.
        let head = `HTTP/1.1 ${theirAnswer.statusCode ?? 101} ${theirAnswer.statusMessage ?? 'Switching Protocols'}\r\n`
        for (let i = 0; i + 1 < theirAnswer.rawHeaders.length; i += 2) head += `${theirAnswer.rawHeaders[i]}: ${theirAnswer.rawHeaders[i + 1]}\r\n`
        const mine = client.socket
        mine.write(`${head}\r\n`)
        if (theirHead.length) mine.write(theirHead)
        if (client.head.length) theirs.write(client.head)
        joined = theirs
        const close = () => {
          mine.destroy()
          theirs.destroy()
          this.open.delete(end)
        }
        for (const s of [mine, theirs]) {
          s.on('error', close)
          s.once('close', close)
        }
        mine.pipe(theirs)
        theirs.pipe(mine)
        settle({ kind: 'answered' })
      })
      hop.once('response', (theirAnswer) => {
        if (declined(theirAnswer)) {
          theirAnswer.resume()
          hop.destroy()
          this.open.delete(end)
          settle({ kind: 'refused' })
          return
        }
        answer()
        res.writeHead(theirAnswer.statusCode ?? 502, pass(theirAnswer.headers))
        // The connection asked for an upgrade it did not get: it ends with the answer.
        relay(theirAnswer, res, () => {
          client.socket.end()
          this.open.delete(end)
          settle({ kind: 'answered' })
        })
      })
      hop.on('error', (err) => {
        if (answering) return end()
        this.open.delete(end)
        settle({ kind: 'unreachable', reused: false, reached: true, err })
      })
      hop.end()
    })
  }

  /** Ends every tunnel and upgrade hop under way. */
  close(): void {
    for (const end of this.open) end()
    this.open.clear()
  }
}
