// GET /: the playground, one static page and its script (no build step), served without a key:
// the page holds no data, and every call it makes goes to the public API with the key typed into it.
import { readFileSync } from 'node:fs'
import type { FastifyInstance, FastifyReply } from 'fastify'

// The page's files stay in src/playground/ (the build compiles TypeScript only); this path finds them from
// src/http/routes (tests) and dist/http/routes (the build) alike, both three levels below the root.
const dir = new URL('../../../src/playground/', import.meta.url)

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
}
