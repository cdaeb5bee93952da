// GET /: the playground, one static page and its scripts (no build step), served without a key:
// the page holds no data, and every call it makes goes to the public API with the key typed into it.
// Its terminal emulator (xterm.js) is served from its npm package here too: no CDN, nothing else to trust.
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import type { FastifyInstance, FastifyReply } from 'fastify'

// The page's files stay in src/playground/ (the build compiles TypeScript only); this path finds them from
// src/http/routes (tests) and dist/http/routes (the build) alike, both three levels below the root.
const dir = new URL('../../../src/playground/', import.meta.url)
const require = createRequire(import.meta.url)
/** The terminal emulator's files, by the name the page asks for (its ES module builds and its stylesheet). */
const XTERM: Record<string, [string, string]> = {
  'xterm.mjs': ['@xterm/xterm/lib/xterm.mjs', 'text/javascript; charset=utf-8'],
  'addon-fit.mjs': ['@xterm/addon-fit/lib/addon-fit.mjs', 'text/javascript; charset=utf-8'],
  'xterm.css': ['@xterm/xterm/css/xterm.css', 'text/css; charset=utf-8'],
}

// Scripts only from this origin (no inline script, no event-handler attributes), so HTML that code
// prints (a pandas table) is shown as markup and cannot run anything or read the key.
const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  'img-src data:',
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ')

export async function playgroundRoutes(app: FastifyInstance): Promise<void> {
  const page = readFileSync(new URL('index.html', dir), 'utf8')
  const script = readFileSync(new URL('app.js', dir), 'utf8')
  const terminal = readFileSync(new URL('terminal.js', dir), 'utf8')
  // The source-map comments point at files not served.
  const xterm = Object.entries(XTERM).map(([name, [module, type]]) => {
    const body = readFileSync(require.resolve(module), 'utf8').replace(/\n\/\/# sourceMappingURL=\S+\s*$/, '\n')
    return [name, type, body] as const
  })
  const send = (reply: FastifyReply, type: string, body: string) =>
    reply
      .type(type)
      .headers({ 'content-security-policy': CSP, 'x-content-type-options': 'nosniff', 'referrer-policy': 'no-referrer', 'cache-control': 'no-cache' })
      .send(body)

  app.get(
    '/',
    {
      schema: {
        operationId: 'playground',
        summary: 'A browser playground: paste an API key, run code, watch the output stream (a static page that calls this API)',
        tags: ['playground'],
        security: [],
        response: { 200: { description: 'The playground page', content: { 'text/html': { schema: { type: 'string' } } } } },
      },
    },
    async (_req, reply) => send(reply, 'text/html; charset=utf-8', page),
  )
  app.get('/playground/app.js', { schema: { hide: true } }, async (_req, reply) => send(reply, 'text/javascript; charset=utf-8', script))
  app.get('/playground/terminal.js', { schema: { hide: true } }, async (_req, reply) => send(reply, 'text/javascript; charset=utf-8', terminal))
  for (const [name, type, body] of xterm) app.get(`/playground/xterm/${name}`, { schema: { hide: true } }, async (_req, reply) => send(reply, type, body))
}
