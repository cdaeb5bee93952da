// A session's terminal: GET /v1/sessions/{id}/pty upgrades to a WebSocket joined to an interactive
// bash in the session's sandbox (http/pty-socket.ts), and POST .../pty-token mints the short-lived
// token a browser's WebSocket sends instead of the Authorization header it cannot set.
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { AppError } from '../../errors.js'
import type { SessionService, SessionTerminal, SessionTerminals } from '../../sessions/index.js'
import { problems, SessionParams } from '../schema-refs.js'
import { bridgeTerminal, MAX_TERMINAL_SIDE } from '../pty-socket.js'
import { mintStreamToken, PTY_TOKEN_SCOPE, STREAM_TOKEN_TTL_S } from '../stream-token.js'

const PTY_DESCRIPTION = [
  "Upgrades to a WebSocket (RFC 6455) joined to an interactive `bash` in a pseudo-terminal in the session's sandbox: in `/workspace`,",
  "as the sandbox's user, with the sandbox's limits and no network, like the session's code. Binary frames carry the terminal's bytes",
  'both ways (keystrokes in, what the terminal shows out). A text frame `{"type":"resize","cols":N,"rows":N}` resizes it (the shell',
  'gets SIGWINCH); any other text frame closes the socket (1008). When the shell exits, a last text frame `{"type":"exit","exit_code":N}`',
  'comes before the close (1000). Closing the socket ends the shell and everything it started. A session deleted, restarted or moved',
  'to another API instance closes its terminals (1001, with the reason). Output a client does not read is held up to',
  'TERMINAL_BUFFER_BYTES, then the shell waits. Without `Upgrade: websocket` the answer is 426 upgrade_required.',
].join(' ')

const Side = (what: string, def: number) =>
  Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_TERMINAL_SIDE, default: def, description: `The terminal's ${what} at the start` }))

const PtyQuery = Type.Object(
  {
    cols: Side('width in columns', 80),
    rows: Side('height in rows', 24),
    access_token: Type.Optional(Type.String({ description: "A token from POST .../pty-token, for browsers' WebSocket (instead of the Authorization header)" })),
  },
  { additionalProperties: false },
)

export interface PtyRouteDeps {
  terminals: SessionTerminals
  sessions: Pick<SessionService, 'record'>
  secret: () => Promise<string>
  /** TERMINAL_BUFFER_BYTES */
  bufferBytes: number
  pingMs: number
}

export async function ptyRoutes(app: FastifyInstance, deps: PtyRouteDeps): Promise<void> {
  const { terminals, sessions, secret } = deps
  const r = app.withTypeProvider<TypeBoxTypeProvider>()
  const tags = ['terminal']
  const security = [{ bearer: [] }]
  /** Terminals opened for an upgrade that the socket has not taken yet. */
  const opened = new WeakMap<FastifyRequest, SessionTerminal>()
  const notUpgraded = () => new AppError('upgrade_required', 'this route speaks WebSocket: send GET with Upgrade: websocket (RFC 6455)')

  r.route({
    method: 'GET',
    url: '/v1/sessions/:id/pty',
    // Only the session's holder reaches its sandbox: other instances pass the upgrade on (src/cluster/upgrade-hop.ts).
    config: { holder: true },
    schema: {
      operationId: 'openTerminal',
      summary: "An interactive terminal in the session's sandbox, over a WebSocket",
      description: PTY_DESCRIPTION,
      tags,
      security,
      params: SessionParams,
      querystring: PtyQuery,
      response: {
        101: { description: 'Switching Protocols: the WebSocket is open, joined to the terminal', type: 'null' },
        ...problems('session_dead', 'too_many_terminals', 'upgrade_required', 'sandbox_failed'),
      },
    },
    // The terminal starts before the upgrade, so a failure is an ordinary HTTP answer (problem+json).
    preHandler: async (req) => {
      const { id } = req.params
      if (!req.ws) {
        await sessions.record(req.tenant, id)
        throw notUpgraded()
      }
      const t = await terminals.open(req.tenant, id, { cols: req.query.cols ?? 80, rows: req.query.rows ?? 24 })
      opened.set(req, t)
      // The upgrade itself may still fail (a malformed handshake): a terminal no socket took ends with the connection.
      req.raw.socket.once('close', () => {
        if (opened.delete(req)) void t.close()
      })
    },
    handler: async () => {
      throw notUpgraded()
    },
    wsHandler: (socket, req) => {
      const t = opened.get(req)
      opened.delete(req)
      if (!t) return socket.close(1011, 'the terminal is gone')
      req.log.info({ sessionId: t.sessionId }, 'terminal connected')
      bridgeTerminal(socket, t, { bufferBytes: deps.bufferBytes, pingMs: deps.pingMs, log: req.log })
    },
  })

  r.post(
    '/v1/sessions/:id/pty-token',
    {
      schema: {
        operationId: 'createPtyToken',
        summary: "A short-lived token that lets a browser's WebSocket open the session's terminal (?access_token=)",
        tags,
        security,
        params: SessionParams,
        response: {
          201: { description: 'The token', ...Type.Object({ token: Type.String(), expires_at: Type.String({ format: 'date-time' }) }) },
        },
      },
    },
    async (req, reply) => {
      const sid = req.params.id
      await sessions.record(req.tenant, sid)
      const exp = Math.floor(Date.now() / 1000) + STREAM_TOKEN_TTL_S
      reply.code(201)
      return { token: mintStreamToken(await secret(), { tenant: req.tenant, sid, eid: PTY_TOKEN_SCOPE, exp }), expires_at: new Date(exp * 1000).toISOString() }
    },
  )
}
