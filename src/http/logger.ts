// The service's logger: pino JSON with secrets redacted wherever they would appear (keys in headers
// and configuration, access tokens in URLs however their name is spelled: src/http/query.ts).
import { pino, type DestinationStream, type Logger } from 'pino'
import { redactUrl } from './query.js'

export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options = {
    level,
    redact: {
      paths: ['req.headers.authorization', 'headers.authorization', '*.apiKey', '*.OPENAI_API_KEY', '*.REPLCAST_INTERNAL_SECRET'],
      censor: '[redacted]',
    },
    serializers: { req: serializeRequest },
  }
  return destination ? pino(options, destination) : pino(options)
}

/** Request log fields: no headers (keys), no access tokens in the URL. */
function serializeRequest(req: { method?: string; url?: string; id?: string }): Record<string, unknown> {
  return { method: req.method, url: redactUrl(req.url ?? ''), id: req.id }
}
